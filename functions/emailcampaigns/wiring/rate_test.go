package wiring

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/functions/emailcampaigns"
	"github.com/botplatform/api/infra/access"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
)

// fakeSESAccount answers SES v2's GetAccount (GET /v2/email/account) with body, or 500
// when body is "", and counts the calls.
func fakeSESAccount(t *testing.T, body string) (*sesv2.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v2/email/account" {
			http.NotFound(w, r)
			return
		}
		calls.Add(1)
		if body == "" {
			w.Header().Set("X-Amzn-Errortype", "InternalFailure")
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return sesv2.New(sesv2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""), RetryMaxAttempts: 1}), &calls
}

// Without EMAIL_RATE the campaigns pace to the SES account's maximum send rate, read once
// when the service is built (bounded by MaxRate); EMAIL_RATE wins and reads nothing; a quota
// that cannot be read leaves the default. The read is granted where the service is built on
// AWS with SES: the emailcampaigns and jobs Lambdas.
func TestRateFollowsTheSESAccount(t *testing.T) {
	t.Parallel()
	envWith := func(client *sesv2.Client, configured float64) *family.Env {
		env := familytest.Env(t, family.Deps{})
		env.EmailSettings.SES, env.EmailSettings.Rate = client, configured
		return env
	}
	client, calls := fakeSESAccount(t, `{"SendQuota":{"Max24HourSend":200000,"MaxSendRate":40,"SentLast24Hours":12},"ProductionAccessEnabled":true}`)
	assert.Equal(t, 40.0, rate(envWith(client, 0)))
	assert.Equal(t, int32(1), calls.Load())
	assert.Equal(t, 25.0, rate(envWith(client, 25)), "EMAIL_RATE wins")
	assert.Equal(t, int32(1), calls.Load(), "and reads nothing")

	huge, _ := fakeSESAccount(t, `{"SendQuota":{"MaxSendRate":50000}}`)
	assert.Equal(t, float64(emailcampaigns.MaxRate), rate(envWith(huge, 0)))
	failing, _ := fakeSESAccount(t, "")
	assert.Zero(t, rate(envWith(failing, 0)), "the default")
	empty, _ := fakeSESAccount(t, `{}`)
	assert.Zero(t, rate(envWith(empty, 0)))
	assert.Zero(t, rate(envWith(nil, 0)), "no SES (locally): the default, no call")

	for _, lambda := range []string{"emailcampaigns", "jobs"} {
		assert.True(t, slices.ContainsFunc(access.Access()[lambda], func(g access.Grant) bool {
			return g.On == access.SESAccount && slices.Equal(g.Actions, []string{"ses:GetAccount"})
		}), "the %s Lambda is granted ses:GetAccount", lambda)
	}
}
