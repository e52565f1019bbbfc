package apigw

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

type noBots struct{}

func (noBots) LoadBot(context.Context, string, string) (any, error) {
	return nil, httpapi.NotFound("bot")
}

type discardAudit struct{}

func (discardAudit) Publish(context.Context, audit.Event) error { return nil }

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// handler serves one route that echoes the caller's account, behind the API Gateway adapter.
func handler(t *testing.T) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	t.Helper()
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: Authenticator(func() time.Time { return now }),
		Bots:         noBots{}, Audit: discardAudit{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now },
	})
	require.NoError(t, err)
	mux.Handle("GET /api/whoami", httpapi.Need("bots:read"), func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.WriteJSON(w, http.StatusOK, map[string]string{"account_id": httpapi.Caller(r).AccountID})
	})
	return Handler(mux)
}

func event(lambdaCtx map[string]any, headers map[string]string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "GET /api/whoami", RawPath: "/api/whoami", Headers: headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "gw-req-1",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/api/whoami"},
		},
	}
	if lambdaCtx != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: lambdaCtx}
	}
	return ev
}

func problemCode(t *testing.T, res events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Body), &p), res.Body)
	code, _ := p["code"].(string)
	return code
}

func TestPrincipalTravelsThroughTheAuthorizerContext(t *testing.T) {
	t.Parallel()
	p := &auth.Principal{AccountID: "acct_a", UserID: "usr_a", TokenID: "pat_a", Kind: auth.KindPAT, Scopes: auth.Scopes{"bots:read"},
		Role: auth.RoleOwner, ExpiresAt: now.Add(time.Hour)}
	allow, err := Allow(p)
	require.NoError(t, err)
	require.True(t, allow.IsAuthorized)
	for _, v := range allow.Context {
		_, isString := v.(string)
		require.True(t, isString, "HTTP API contexts hold scalars only")
	}
	res, err := handler(t)(context.Background(), event(allow.Context, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.StatusCode, res.Body)
	assert.JSONEq(t, `{"account_id":"acct_a"}`, res.Body)
}

func TestFailsClosed(t *testing.T) {
	t.Parallel()
	h := handler(t)
	expired, err := Allow(&auth.Principal{AccountID: "acct_a", TokenID: "pat_a", Kind: auth.KindPAT, Scopes: auth.Scopes{"*"}, ExpiresAt: now})
	require.NoError(t, err)
	forged, _ := json.Marshal(events.APIGatewayV2HTTPRequestContext{Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		Lambda: map[string]any{ContextPrincipal: `{"account_id":"acct_victim","token_id":"pat_x","token_kind":"pat","scopes":["*"]}`}}})
	cases := []struct {
		name    string
		ctx     map[string]any
		headers map[string]string
		code    string
	}{
		{"no authorizer context", nil, nil, "missing_credentials"},
		// The adapter copies the gateway context into a request header; a client sending that
		// header itself must gain nothing.
		{"forged context header", nil, map[string]string{"x-golambdaproxy-apigw-context": string(forged), "X-GoLambdaProxy-ApiGateway-Context": string(forged)}, "missing_credentials"},
		{"empty authorizer context", map[string]any{}, nil, "missing_credentials"},
		{"garbled principal", map[string]any{ContextPrincipal: "{not json"}, nil, "invalid_token"},
		{"principal without account", map[string]any{ContextPrincipal: `{"token_id":"pat_a"}`}, nil, "invalid_token"},
		{"missing credentials", map[string]any{ContextAuthError: "missing_credentials"}, nil, "missing_credentials"},
		{"malformed token", map[string]any{ContextAuthError: "malformed_token"}, nil, "invalid_token"},
		{"unknown token", map[string]any{ContextAuthError: "unknown_token"}, nil, "invalid_token"},
		{"expired token", map[string]any{ContextAuthError: "expired_token"}, nil, "token_expired"},
		{"unheard-of error", map[string]any{ContextAuthError: "gremlins"}, nil, "invalid_token"},
		{"cached past its expiry", expired.Context, nil, "token_expired"},
	}
	for _, c := range cases {
		res, err := h(context.Background(), event(c.ctx, c.headers))
		require.NoError(t, err, c.name)
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, c.name)
		assert.Equal(t, c.code, problemCode(t, res), c.name)
	}
}

func TestRefuseOnlyAuthenticationFailures(t *testing.T) {
	t.Parallel()
	for _, err := range []error{auth.ErrMissingCredentials, auth.ErrMalformedToken, auth.ErrUnknownToken, auth.ErrExpiredToken} {
		res, ok := Refuse(err)
		require.True(t, ok, err.Error())
		assert.True(t, res.IsAuthorized, "the family Lambda answers the 401")
		assert.NotContains(t, res.Context, ContextPrincipal)
	}
	_, ok := Refuse(io.ErrUnexpectedEOF)
	assert.False(t, ok, "a lookup failure must not be turned into a cached answer")
}
