package emaildomains

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/infra/access"
)

// fakeSESIdentities plays the SES v2 identity endpoints: it keeps identities by name and
// answers AlreadyExists and NotFound as SES does.
type fakeSESIdentities struct {
	mu         sync.Mutex
	identities map[string]map[string]any // name -> last DKIM signing attributes
	mailFrom   map[string]map[string]any
	calls      []string
}

func (f *fakeSESIdentities) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/") {
		http.Error(w, "unsigned", http.StatusForbidden)
		return
	}
	var body map[string]any
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	fail := func(status int, typ string) {
		w.Header().Set("X-Amzn-ErrorType", typ)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"message":"`+typ+`"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	rest, _ := strings.CutPrefix(r.URL.Path, "/v2/email/identities")
	name, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case r.Method == http.MethodPost && rest == "":
		id, _ := body["EmailIdentity"].(string)
		if _, ok := f.identities[id]; ok {
			fail(http.StatusBadRequest, "AlreadyExistsException")
			return
		}
		attrs, _ := body["DkimSigningAttributes"].(map[string]any)
		f.identities[id] = attrs
		_, _ = io.WriteString(w, `{"IdentityType":"DOMAIN","VerifiedForSendingStatus":false}`)
	case r.Method == http.MethodPut && sub == "dkim/signing":
		if _, ok := f.identities[name]; !ok {
			fail(http.StatusNotFound, "NotFoundException")
			return
		}
		if body["SigningAttributesOrigin"] != "EXTERNAL" {
			http.Error(w, "origin", http.StatusBadRequest)
			return
		}
		attrs, _ := body["SigningAttributes"].(map[string]any)
		f.identities[name] = attrs
		_, _ = io.WriteString(w, `{}`)
	case r.Method == http.MethodPut && sub == "mail-from":
		f.mailFrom[name] = body
		_, _ = io.WriteString(w, `{}`)
	case r.Method == http.MethodDelete && sub == "":
		if _, ok := f.identities[name]; !ok {
			fail(http.StatusNotFound, "NotFoundException")
			return
		}
		delete(f.identities, name)
		_, _ = io.WriteString(w, `{}`)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

func TestSESIdentities(t *testing.T) {
	t.Parallel()
	fake := &fakeSESIdentities{identities: map[string]map[string]any{}, mailFrom: map[string]map[string]any{}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := sesv2.New(sesv2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	ids := SESIdentities{Client: client}
	ctx := t.Context()
	der, err := x509.MarshalPKCS8PrivateKey(testKey())
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})

	require.NoError(t, ids.Register(ctx, "example.com", "bpabc", keyPEM))
	attrs := fake.identities["example.com"]
	require.NotNil(t, attrs)
	assert.Equal(t, "bpabc", attrs["DomainSigningSelector"])
	raw, err := base64.StdEncoding.DecodeString(attrs["DomainSigningPrivateKey"].(string))
	require.NoError(t, err, "the key is base64")
	k, err := x509.ParsePKCS1PrivateKey(raw)
	require.NoError(t, err, "of a PKCS #1 DER key")
	assert.True(t, testKey().Equal(k))
	assert.Equal(t, map[string]any{"MailFromDomain": "bounce.example.com", "BehaviorOnMxFailure": "USE_DEFAULT_VALUE"}, fake.mailFrom["example.com"])

	// Registering again replaces the key of the existing identity.
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey())})
	require.NoError(t, ids.Register(ctx, "example.com", "bpdef", pkcs1))
	assert.Equal(t, "bpdef", fake.identities["example.com"]["DomainSigningSelector"])

	require.NoError(t, ids.Deregister(ctx, "example.com"))
	assert.NotContains(t, fake.identities, "example.com")
	require.NoError(t, ids.Deregister(ctx, "example.com"), "already gone is not an error")
	assert.Equal(t, []string{
		"POST /v2/email/identities",
		"PUT /v2/email/identities/example.com/mail-from",
		"POST /v2/email/identities",
		"PUT /v2/email/identities/example.com/dkim/signing",
		"PUT /v2/email/identities/example.com/mail-from",
		"DELETE /v2/email/identities/example.com",
		"DELETE /v2/email/identities/example.com",
	}, fake.calls)

	assert.Error(t, ids.Register(ctx, "example.com", "s", []byte("not pem")))
	assert.Error(t, SESIdentities{}.Register(ctx, "example.com", "s", keyPEM))
}

// newFakeSES starts a fakeSESIdentities and returns it with SESIdentities speaking to it.
func newFakeSES(t *testing.T) (*fakeSESIdentities, SESIdentities) {
	t.Helper()
	fake := &fakeSESIdentities{identities: map[string]map[string]any{}, mailFrom: map[string]map[string]any{}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := sesv2.New(sesv2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	return fake, SESIdentities{Client: client}
}

// callsSince returns the calls the fake received after the first n.
func (f *fakeSESIdentities) callsSince(n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls[n:])
}

// sesAction is the IAM action SES authorizes a call of fakeSESIdentities' log with.
func sesAction(call string) string {
	method, path, _ := strings.Cut(call, " ")
	rest, _ := strings.CutPrefix(path, "/v2/email/identities")
	_, sub, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case method == http.MethodPost && rest == "":
		return "ses:CreateEmailIdentity"
	case method == http.MethodPut && sub == "dkim/signing":
		return "ses:PutEmailIdentityDkimSigningAttributes"
	case method == http.MethodPut && sub == "mail-from":
		return "ses:PutEmailIdentityMailFromAttributes"
	case method == http.MethodDelete && sub == "":
		return "ses:DeleteEmailIdentity"
	}
	return "unknown SES call " + call
}

// requireSESGranted fails unless the IAM table (infra/access) grants lambda, on the SES
// identities, the action of every call in calls: what the code called SES with is what the
// Lambda that runs it must be allowed.
func requireSESGranted(t *testing.T, lambda string, calls []string) {
	t.Helper()
	row, ok := access.Access()[lambda]
	require.True(t, ok, "no Lambda %q in infra/access", lambda)
	for _, c := range calls {
		a := sesAction(c)
		assert.True(t, slices.ContainsFunc(row, func(g access.Grant) bool {
			return g.On == access.EmailIdentities && slices.Contains(g.Actions, a)
		}), "the %s Lambda is not granted %s on the SES identities (needed by %s)", lambda, a, c)
	}
}

// The service registers a domain with SES through SESIdentities the first time it verifies,
// and the release job its deletion stages deregisters it.
func TestVerifyRegistersWithSES(t *testing.T) {
	t.Parallel()
	fake, ses := newFakeSES(t)
	f := newFixture(t, func(c *Config) { c.Identities = ses })
	d := f.verified(t, f.bot, "example.com")
	assert.Equal(t, d.DKIMSelector, fake.identities["example.com"]["DomainSigningSelector"])
	require.NoError(t, f.svc.Delete(t.Context(), f.bot, d.ID, nil))
	assert.Contains(t, fake.identities, "example.com", "not before the release job")
	routes := fake.callsSince(0)
	// On AWS the emaildomains Lambda serves the routes and the jobs Lambda runs the job.
	requireSESGranted(t, "emaildomains", routes)
	released, err := f.releases(t)
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com"}, released)
	assert.Empty(t, fake.identities)
	job := fake.callsSince(len(routes))
	assert.Equal(t, []string{"DELETE /v2/email/identities/example.com"}, job)
	requireSESGranted(t, "jobs", job)
}
