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
	"github.com/stretchr/testify/require"

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

// Without EMAIL_RATE, on AWS, the campaigns' quota is the SES account's maximum send rate
// (GetAccount); with EMAIL_RATE, or without SES (locally), there is none to ask. Asking is
// granted where the send steps run on AWS: the jobs Lambda (the emailcampaigns Lambda sends none).
func TestQuotaIsTheSESAccounts(t *testing.T) {
	t.Parallel()
	envWith := func(client *sesv2.Client, configured float64) *family.Env {
		env := familytest.Env(t, family.Deps{})
		env.EmailSettings.SES, env.EmailSettings.Rate = client, configured
		return env
	}
	client, calls := fakeSESAccount(t, `{"SendQuota":{"Max24HourSend":200000,"MaxSendRate":40,"SentLast24Hours":12},"ProductionAccessEnabled":true}`)
	q := quota(envWith(client, 0))
	assert.Zero(t, calls.Load(), "nothing is asked before a send needs it")
	r, err := q(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 40.0, r)
	assert.Equal(t, int32(1), calls.Load())
	assert.Nil(t, quota(envWith(client, 25)), "EMAIL_RATE wins")
	assert.Nil(t, quota(envWith(nil, 0)), "no SES (locally)")

	failing, _ := fakeSESAccount(t, "")
	_, err = quota(envWith(failing, 0))(t.Context())
	assert.Error(t, err)
	empty, _ := fakeSESAccount(t, `{}`)
	_, err = quota(envWith(empty, 0))(t.Context())
	assert.Error(t, err)

	for lambda, granted := range map[string]bool{"jobs": true, "emailcampaigns": false} {
		assert.Equal(t, granted, slices.ContainsFunc(access.Access()[lambda], func(g access.Grant) bool {
			return g.On == access.SESAccount && slices.Equal(g.Actions, []string{"ses:GetAccount"})
		}), "the %s Lambda's grant of ses:GetAccount", lambda)
	}
}
