package email

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sesRequest is the part of a SendEmail request body the tests look at.
type sesRequest struct {
	Content struct {
		Raw struct {
			Data []byte // base64 in JSON
		}
	}
	Destination struct {
		ToAddresses []string
	}
	EmailTags                   []struct{ Name, Value string }
	ConfigurationSetName        string
	FromEmailAddressIdentityArn string
}

// fakeSES plays the SES v2 SendEmail endpoint. When errType is set it answers with
// that error and status instead of accepting.
type fakeSES struct {
	errType string
	status  int

	mu       sync.Mutex
	requests []sesRequest
	auth     []string
}

func (f *fakeSES) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v2/email/outbound-emails" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req sesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if f.errType != "" {
		w.Header().Set("X-Amzn-ErrorType", f.errType)
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, `{"message":"refused by the fake"}`)
		return
	}
	_, _ = io.WriteString(w, `{"MessageId":"0100018f-fake-message-id"}`)
}

// newSESClient points a real sesv2 client at the fake, with static credentials and no
// retries.
func newSESClient(t *testing.T, f *fakeSES) *sesv2.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return sesv2.New(sesv2.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		Retryer:      aws.NopRetryer{},
	})
}

func TestSESSendsSignedRawMessage(t *testing.T) {
	t.Parallel()
	fake := &fakeSES{}
	sender := &SES{
		Client:           newSESClient(t, fake),
		ConfigurationSet: "campaigns",
		FromARN:          "arn:aws:ses:eu-west-1:123456789012:identity/example.com",
		DKIM:             testSigner(),
	}
	m := sampleMessage()
	rcpt, err := sender.Send(context.Background(), m)
	require.NoError(t, err)
	assert.Equal(t, Receipt{MessageID: "0100018f-fake-message-id", Provider: "ses"}, rcpt)

	require.Len(t, fake.requests, 1)
	req := fake.requests[0]
	assert.True(t, strings.HasPrefix(fake.auth[0], "AWS4-HMAC-SHA256 Credential=AKIDTEST/"), "request is SigV4-signed")
	assert.Equal(t, "campaigns", req.ConfigurationSetName)
	assert.Equal(t, sender.FromARN, req.FromEmailAddressIdentityArn)
	assert.Equal(t, []string{"lukasz@example.org"}, req.Destination.ToAddresses)
	assert.Equal(t, []struct{ Name, Value string }{{"campaign", "cmp_42"}, {"variant", "b"}}, req.EmailTags)

	raw := req.Content.Raw.Data
	require.NotEmpty(t, raw)
	requireCRLF(t, raw)
	verifyDKIM(t, raw)
	p := parseMultipart(t, raw)
	assert.Equal(t, m.Text, p.text)
	assert.Empty(t, p.msg.Header.Get("X-Tags"), "tags travel as SES message tags, not in the message")
}

func TestSESErrorClassification(t *testing.T) {
	t.Parallel()
	cases := []struct {
		errType   string
		status    int
		permanent bool
	}{
		{"MessageRejected", http.StatusBadRequest, true},
		{"BadRequestException", http.StatusBadRequest, true},
		{"TooManyRequestsException", http.StatusTooManyRequests, false},
		{"SendingPausedException", http.StatusBadRequest, false},
		{"AccountSuspendedException", http.StatusBadRequest, false},
		{"MailFromDomainNotVerifiedException", http.StatusBadRequest, false},
		{"InternalServiceErrorException", http.StatusInternalServerError, false},
	}
	for _, tc := range cases {
		t.Run(tc.errType, func(t *testing.T) {
			t.Parallel()
			fake := &fakeSES{errType: tc.errType, status: tc.status}
			_, err := (&SES{Client: newSESClient(t, fake)}).Send(context.Background(), sampleMessage())
			var se *SendError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.permanent, se.Permanent)
			assert.Equal(t, tc.status, se.Code)
			var apiErr smithy.APIError
			require.ErrorAs(t, err, &apiErr, "the SES error stays reachable")
			assert.Equal(t, tc.errType, apiErr.ErrorCode())
		})
	}
}

func TestSESRefusesBadTagsWithoutCalling(t *testing.T) {
	t.Parallel()
	fake := &fakeSES{}
	sender := &SES{Client: newSESClient(t, fake)}
	m := sampleMessage()
	m.Tags["campaign"] = "spring sale!"
	_, err := sender.Send(context.Background(), m)
	assert.True(t, IsPermanent(err))
	assert.ErrorIs(t, err, ErrInvalidMessage)
	assert.Empty(t, fake.requests)

	_, err = (&SES{}).Send(context.Background(), sampleMessage())
	assert.ErrorIs(t, err, ErrConfig)

	// A network failure is temporary.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	down := sesv2.New(sesv2.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(url), Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	_, err = (&SES{Client: down}).Send(context.Background(), sampleMessage())
	var se *SendError
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Permanent)
	assert.Zero(t, se.Code)
}
