package channels

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// fakeAdapter is a provider that accepts the key "good" and refuses others.
type fakeAdapter struct {
	kind     channel.Kind
	lookup   string
	down     bool
	requests []channel.ConnectRequest
}

type fakeCreds struct {
	Key string `json:"key"`
	// Account, when set, is the provider account the key is of (the lookup key).
	Account string `json:"account,omitempty"`
}

func (f *fakeAdapter) Kind() channel.Kind { return f.kind }
func (f *fakeAdapter) Capabilities() channel.Capabilities {
	return channel.Capabilities{Kind: f.kind, ConnectableOverREST: true}
}
func (f *fakeAdapter) Credentials() any { return &fakeCreds{} }
func (f *fakeAdapter) Connect(_ context.Context, req channel.ConnectRequest) (channel.ConnectResult, error) {
	f.requests = append(f.requests, req)
	c := req.Credentials.(*fakeCreds)
	switch {
	case f.down:
		return channel.ConnectResult{}, &channel.Error{Kind: channel.ErrUnavailable, Provider: f.kind}
	case c.Key == "":
		return channel.ConnectResult{}, &channel.CredentialsError{Field: "key", Message: "is required"}
	case c.Key != "good" && c.Key != "good2":
		return channel.ConnectResult{}, &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: f.kind, Code: "401"}
	}
	lookup := f.lookup
	if c.Account != "" {
		lookup = c.Account
	}
	return channel.ConnectResult{Settings: json.RawMessage(`{"handle":"@demo"}`), Credentials: json.RawMessage(`{"key":"` + c.Key + `"}`),
		DisplayName: "@demo", LookupKey: lookup}, nil
}
func (f *fakeAdapter) Send(context.Context, channel.Connection, string, channel.Message) (string, error) {
	return "", nil
}
func (f *fakeAdapter) Verify(*http.Request, []byte, channel.Connection) error { return nil }
func (f *fakeAdapter) Parse([]byte) ([]channel.Inbound, error)                { return nil, nil }

func newService(t *testing.T, publicURL string, adapters ...channel.Adapter) *Service {
	t.Helper()
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	return NewService(sqlitetest.Open(t), secretstest.Wrap(key, kms.PurposeSecrets), adapters, func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }, publicURL)
}

func problemCode(err error) string {
	var e *httpapi.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestConnectStoresSealedAndResolves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wa := &fakeAdapter{kind: channel.WhatsApp, lookup: "phone-1"}
	s := newService(t, "https://api.example.com/", wa)

	c, err := s.Connect(ctx, "acct_a", "bot_a", channel.WhatsApp, "", &fakeCreds{Key: "good"})
	require.NoError(t, err)
	assert.Equal(t, "@demo", c.Name)
	assert.Equal(t, "https://api.example.com/webhooks/whatsapp", c.WebhookURL)
	require.Len(t, wa.requests, 1)
	assert.Len(t, wa.requests[0].WebhookSecret, 43, "a fresh 256-bit secret")

	// The stored record holds no credential in the clear.
	it, err := s.store.Get(ctx, recordKey(c.ID))
	require.NoError(t, err)
	assert.NotContains(t, string(it.Data), `"good"`)
	assert.NotContains(t, string(it.Data), wa.requests[0].WebhookSecret)

	for name, resolve := range map[string]func() (Resolved, error){
		"by id":   func() (Resolved, error) { return s.Resolve(ctx, c.ID) },
		"by key":  func() (Resolved, error) { return s.ResolveKey(ctx, channel.WhatsApp, "phone-1") },
		"by type": func() (Resolved, error) { return s.ResolveBot(ctx, "bot_a", channel.WhatsApp) },
	} {
		r, err := resolve()
		require.NoError(t, err, name)
		assert.JSONEq(t, `{"key":"good"}`, string(r.Conn.Credentials), name)
		assert.Equal(t, wa.requests[0].WebhookSecret, r.WebhookSecret, name)
		assert.Equal(t, "acct_a", r.AccountID, name)
	}

	list, next, err := s.List(ctx, "bot_a", 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, list, 1)
	assert.Equal(t, c.ID, list[0].ID)

	// One channel per type per bot; one bot per provider account.
	_, err = s.Connect(ctx, "acct_a", "bot_a", channel.WhatsApp, "", &fakeCreds{Key: "good"})
	assert.Equal(t, "channel_exists", problemCode(err))
	_, err = s.Connect(ctx, "acct_b", "bot_b", channel.WhatsApp, "", &fakeCreds{Key: "good"})
	assert.Equal(t, "channel_in_use", problemCode(err))

	// Another bot cannot see or disconnect it; its own bot can.
	_, err = s.Get(ctx, "bot_b", c.ID)
	assert.Equal(t, "not_found", problemCode(err))
	assert.Equal(t, "not_found", problemCode(s.Disconnect(ctx, "bot_b", c.ID)))
	require.NoError(t, s.Disconnect(ctx, "bot_a", c.ID))
	_, err = s.Resolve(ctx, c.ID)
	assert.Equal(t, "not_found", problemCode(err))
	_, err = s.ResolveKey(ctx, channel.WhatsApp, "phone-1")
	assert.Equal(t, "not_found", problemCode(err))
	// Once disconnected, the number can be connected again (to any bot).
	_, err = s.Connect(ctx, "acct_b", "bot_b", channel.WhatsApp, "", &fakeCreds{Key: "good"})
	require.NoError(t, err)
}

// New credentials for the same provider account replace the sealed ones, checked with the
// provider under the channel's own webhook secret; another account's are refused.
func TestReplaceCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	wa := &fakeAdapter{kind: channel.WhatsApp, lookup: "phone-1"}
	s := newService(t, "https://api.example.com/", wa)
	c, err := s.Connect(ctx, "acct_a", "bot_a", channel.WhatsApp, "", &fakeCreds{Key: "good"})
	require.NoError(t, err)

	got, err := s.ReplaceCredentials(ctx, "bot_a", c.ID, &fakeCreds{Key: "good2"})
	require.NoError(t, err)
	assert.Equal(t, c.ID, got.ID)
	require.Len(t, wa.requests, 2)
	assert.Equal(t, wa.requests[0].WebhookSecret, wa.requests[1].WebhookSecret, "the same webhook secret")
	assert.Equal(t, c.WebhookURL, wa.requests[1].WebhookURL)
	r, err := s.ResolveKey(ctx, channel.WhatsApp, "phone-1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"key":"good2"}`, string(r.Conn.Credentials), "the new credentials are used at once")
	it, err := s.store.Get(ctx, recordKey(c.ID))
	require.NoError(t, err)
	assert.NotContains(t, string(it.Data), "good2", "sealed")

	_, err = s.ReplaceCredentials(ctx, "bot_a", c.ID, &fakeCreds{Key: "good", Account: "phone-2"})
	assert.Equal(t, "channel_account_changed", problemCode(err))
	_, err = s.ReplaceCredentials(ctx, "bot_a", c.ID, &fakeCreds{Key: "bad"})
	assert.Equal(t, "credentials_rejected", problemCode(err))
	_, err = s.ReplaceCredentials(ctx, "bot_b", c.ID, &fakeCreds{Key: "good"})
	assert.Equal(t, "not_found", problemCode(err), "another bot's channel")
	r, err = s.Resolve(ctx, c.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"key":"good2"}`, string(r.Conn.Credentials), "refusals change nothing")
}

func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vk := &fakeAdapter{kind: channel.VK}
	s := newService(t, "", vk)
	_, err := s.Connect(ctx, "acct_a", "bot_a", channel.VK, "", &fakeCreds{Key: "bad"})
	assert.Equal(t, "credentials_rejected", problemCode(err))
	_, err = s.Connect(ctx, "acct_a", "bot_a", channel.VK, "", &fakeCreds{})
	assert.Equal(t, "validation_failed", problemCode(err))
	vk.down = true
	_, err = s.Connect(ctx, "acct_a", "bot_a", channel.VK, "", &fakeCreds{Key: "good"})
	assert.Equal(t, "provider_unavailable", problemCode(err))
	assert.Empty(t, vk.requests[0].WebhookURL, "no public URL: nothing registered with the provider")
	_, err = s.Connect(ctx, "acct_a", "bot_a", channel.Telegram, "", &fakeCreds{Key: "good"})
	assert.ErrorIs(t, err, ErrUnknownType)
	list, _, err := s.List(ctx, "bot_a", 10, "")
	require.NoError(t, err)
	assert.Empty(t, list, "nothing stored by a refused connect")
}

// countingSealer counts the values it opens.
type countingSealer struct {
	secrets.Sealer
	opens atomic.Int64
}

func (c *countingSealer) Open(ctx context.Context, sealed, aad []byte) ([]byte, error) {
	c.opens.Add(1)
	return c.Sealer.Open(ctx, sealed, aad)
}

// A channel's credentials are opened once per process while its record holds the same
// sealed values: new credentials stored by another process (a second Lambda container, the
// admin CLI) are used at once, and a disconnected channel no longer resolves.
func TestOpenedCredentialsAreCachedWhileTheRecordHoldsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	st := sqlitetest.Open(t)
	now := func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }
	wa := &fakeAdapter{kind: channel.WhatsApp, lookup: "phone-1"}
	sealer := &countingSealer{Sealer: secretstest.Wrap(key, kms.PurposeSecrets)}
	a := NewService(st, sealer, []channel.Adapter{wa}, now, "")
	b := NewService(st, key, []channel.Adapter{wa}, now, "") // another process

	c, err := b.Connect(ctx, "acct_a", "bot_a", channel.WhatsApp, "", &fakeCreds{Key: "good"})
	require.NoError(t, err)
	for range 3 {
		r, err := a.ResolveBot(ctx, "bot_a", channel.WhatsApp)
		require.NoError(t, err)
		assert.JSONEq(t, `{"key":"good"}`, string(r.Conn.Credentials))
		clear(r.Conn.Credentials) // a caller's copy is its own, the first one included
	}
	assert.Equal(t, int64(2), sealer.opens.Load(), "the credentials and the webhook secret, once")

	_, err = b.ReplaceCredentials(ctx, "bot_a", c.ID, &fakeCreds{Key: "good2"})
	require.NoError(t, err)
	r, err := a.Resolve(ctx, c.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"key":"good2"}`, string(r.Conn.Credentials), "the new credentials at once")
	assert.Equal(t, int64(4), sealer.opens.Load())

	require.NoError(t, b.Disconnect(ctx, "bot_a", c.ID))
	_, err = a.Resolve(ctx, c.ID)
	assert.Equal(t, "not_found", problemCode(err))
}
