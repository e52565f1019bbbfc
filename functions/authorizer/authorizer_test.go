package authorizer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/apigw"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// brokenStore fails every read, as DynamoDB does when it is unreachable.
type brokenStore struct{ store.Store }

func (brokenStore) Get(context.Context, store.Key) (store.Item, error) {
	return store.Item{}, errors.New("connection refused")
}

func TestHandler(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	st := sqlitetest.Open(t, sqlite.WithClock(now))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := auth.NewService(st, now, log, auth.WithCacheTTL(0))
	ctx := context.Background()
	setup := sqlitetest.Unrecorded(ctx) // the operator's, not the authorizer's
	acct, owner, err := svc.CreateAccount(setup, "A")
	require.NoError(t, err)
	_, tok, err := svc.IssuePAT(setup, acct.ID, owner.ID, "t", auth.Scopes{"bots:read"}, clock.Add(time.Hour))
	require.NoError(t, err)
	_, short, err := svc.IssuePAT(setup, acct.ID, owner.ID, "short", auth.Scopes{"bots:read"}, clock.Add(time.Second))
	require.NoError(t, err)
	clock = clock.Add(2 * time.Second)

	h := Handler(svc, log)
	call := func(headers map[string]string) events.APIGatewayV2CustomAuthorizerSimpleResponse {
		res, err := h(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: headers})
		require.NoError(t, err)
		return res
	}

	res := call(map[string]string{"authorization": "Bearer " + tok})
	require.True(t, res.IsAuthorized)
	var p auth.Principal
	require.NoError(t, json.Unmarshal([]byte(res.Context[apigw.ContextPrincipal].(string)), &p))
	assert.Equal(t, acct.ID, p.AccountID)
	assert.Equal(t, owner.ID, p.UserID)
	assert.Equal(t, auth.Scopes{"bots:read"}, p.Scopes)
	assert.NotContains(t, res.Context[apigw.ContextPrincipal], tok, "the context never carries the token")
	assert.Equal(t, "pat", string(p.Kind))

	// Header names in any case.
	assert.Contains(t, call(map[string]string{"Authorization": "Bearer " + tok}).Context, apigw.ContextPrincipal)

	for name, c := range map[string]struct {
		headers map[string]string
		code    string
	}{
		"missing":   {nil, "missing_credentials"},
		"malformed": {map[string]string{"authorization": "Bearer nope"}, "malformed_token"},
		"unknown":   {map[string]string{"authorization": "Bearer " + auth.NewToken(auth.KindPAT)}, "unknown_token"},
		"expired":   {map[string]string{"authorization": "Bearer " + short}, "expired_token"},
	} {
		res := call(c.headers)
		assert.True(t, res.IsAuthorized, name)
		assert.Equal(t, c.code, res.Context[apigw.ContextAuthError], name)
		assert.NotContains(t, res.Context, apigw.ContextPrincipal, name)
	}

	// A store outage is an error (API Gateway answers 500 and caches nothing), not a refusal.
	broken := Handler(auth.NewService(brokenStore{st}, now, log, auth.WithCacheTTL(0)), log)
	_, err = broken(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + tok}})
	assert.Error(t, err)
}
