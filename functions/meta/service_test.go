package meta

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	metafake "github.com/botplatform/api/tests/fakes/meta"
)

var t0 = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)

// bots is a directory of accounts' bots.
type bots map[string][]string

func (b bots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if !slices.Contains(b[account], bot) {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

// fakeChannels records the connects and credential replacements the service asks for.
type fakeChannels struct {
	mu       sync.Mutex
	creds    []whatsapp.Credentials
	replaced map[string]whatsapp.Credentials // by channel id
	down     bool                            // ReplaceCredentials answers 503
	gone     map[string]bool
	// connecting, when set, runs while Connect is in flight (between the provider's check
	// and the channel's record, where a concurrent request can land).
	connecting func()
}

func (c *fakeChannels) ReplaceCredentials(_ context.Context, _, id string, creds any) (channels.Channel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.gone[id]:
		return channels.Channel{}, httpapi.NotFound("channel")
	case c.down:
		return channels.Channel{}, httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "down")
	}
	if c.replaced == nil {
		c.replaced = map[string]whatsapp.Credentials{}
	}
	c.replaced[id] = *creds.(*whatsapp.Credentials)
	return channels.Channel{ID: id}, nil
}

func (c *fakeChannels) replacedOf(id string) (whatsapp.Credentials, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cr, ok := c.replaced[id]
	return cr, ok
}

func (c *fakeChannels) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

func (c *fakeChannels) Connect(_ context.Context, _, bot string, k channel.Kind, name string, creds any) (channels.Channel, error) {
	c.mu.Lock()
	c.creds = append(c.creds, *creds.(*whatsapp.Credentials))
	connecting := c.connecting
	c.mu.Unlock()
	if connecting != nil {
		connecting()
	}
	return channels.Channel{ID: ids.At("ch", t0), BotID: bot, Type: k, Name: name, Status: channels.StatusActive}, nil
}

// Disconnect is the service disconnecting a channel (the channels route's own is disconnect).
func (c *fakeChannels) Disconnect(_ context.Context, _, id string) error {
	c.disconnect(id)
	return nil
}

func (c *fakeChannels) Adapter(channel.Kind) (channel.Adapter, bool) { return nil, true }

// Get finds a channel while it is not disconnected.
func (c *fakeChannels) Get(_ context.Context, _, id string) (channels.Channel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone[id] {
		return channels.Channel{}, httpapi.NotFound("channel")
	}
	return channels.Channel{ID: id}, nil
}

func (c *fakeChannels) disconnect(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone == nil {
		c.gone = map[string]bool{}
	}
	c.gone[id] = true
}

type fixture struct {
	svc   *Service
	fake  *metafake.Server
	clock *httpapitest.Clock
	chans *fakeChannels
	queue *queuetest.Sender
	st    store.Store
	owner *auth.Principal
	bot   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := httpapitest.NewClock(t0, time.Millisecond)
	st := sqlitetest.Open(t, sqlite.WithClock(clock.Now))
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	f := &fixture{fake: metafake.New(t), clock: clock, chans: &fakeChannels{}, queue: &queuetest.Sender{}, st: st, bot: ids.At("bot", t0)}
	f.svc, err = New(Config{Store: st, Sealer: secretstest.Wrap(key, kms.PurposeCRMCredentials), Bots: bots{"acct_a": {f.bot}}, Audit: audit.NewLog(st), Channels: f.chans,
		Queue: f.queue, Settings: Settings{AppID: metafake.AppID, AppSecret: metafake.AppSecret, RedirectURL: metafake.RedirectURI,
			GraphURL: f.fake.URL(), DialogURL: f.fake.URL()},
		Log: slog.New(slog.DiscardHandler), Now: clock.Now})
	require.NoError(t, err)
	f.owner = &auth.Principal{AccountID: "acct_a", UserID: "usr_a", Kind: auth.KindPAT, Role: auth.RoleOwner, Scopes: auth.Scopes{"*"}}
	return f
}

// connect runs start, the dialog and the callback.
func (f *fixture) connect(t *testing.T) Connection {
	t.Helper()
	st, err := f.svc.Start(context.Background(), f.owner)
	require.NoError(t, err)
	q, err := crmfake.Consent(st.AuthorizeURL)
	require.NoError(t, err)
	c, actor, err := f.svc.Callback(context.Background(), q)
	require.NoError(t, err)
	require.NotNil(t, actor)
	assert.Equal(t, "acct_a", actor.Principal.AccountID)
	return c
}

// selectPhone selects the connection's verified number and returns its asset id.
func (f *fixture) selectPhone(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	a, err := f.svc.GetAssets(ctx, "acct_a", id)
	require.NoError(t, err)
	phone := "phone:" + metafake.PhoneNumberID
	_, err = f.svc.Select(ctx, "acct_a", id, SelectionRequest{AssetIDs: []string{phone}, ExpectedRevision: &a.Revision})
	require.NoError(t, err)
	return phone
}

// attach selects the connection's verified number and attaches it to the bot.
func (f *fixture) attach(t *testing.T, id string) channels.Channel {
	t.Helper()
	ch, err := f.svc.Attach(context.Background(), f.owner, id, AttachRequest{AssetID: f.selectPhone(t, id), BotID: f.bot})
	require.NoError(t, err)
	return ch
}

// noTokens fails when any token the fake issued, or the app secret, is in b.
func (f *fixture) noTokens(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, tok := range append(f.fake.Tokens(), metafake.AppSecret) {
		assert.NotContains(t, string(b), tok, "%s holds a token or the app secret", what)
	}
}

func TestStartCallbackAssets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	st, err := f.svc.Start(ctx, f.owner)
	require.NoError(t, err)
	assert.Equal(t, StatusPending, st.Status)
	assert.True(t, ids.Valid("mtc", st.ID))
	u, err := url.Parse(st.AuthorizeURL)
	require.NoError(t, err)
	assert.Equal(t, f.fake.URL()+"/v21.0/dialog/oauth", u.Scheme+"://"+u.Host+u.Path)
	assert.Equal(t, strings.Join(Scopes, " "), u.Query().Get("scope"))
	assert.Equal(t, metafake.AppID, u.Query().Get("client_id"))
	assert.Equal(t, t0.Add(StateTTL).Truncate(time.Second), st.StateExpiresAt)

	q, err := crmfake.Consent(st.AuthorizeURL)
	require.NoError(t, err)
	c, _, err := f.svc.Callback(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, StatusActive, c.Status)
	assert.Equal(t, &User{ID: metafake.UserID, Name: metafake.UserName}, c.User)
	assert.Contains(t, c.GrantedPermissions, "whatsapp_business_messaging")
	assert.Equal(t, Counts{Pages: 2, InstagramAccounts: 1, WhatsAppBusinessAccounts: 1, WhatsAppPhoneNumbers: 2}, c.AssetCounts)
	require.NotNil(t, c.ExpiresAt)
	assert.WithinDuration(t, t0.Add(60*24*time.Hour), *c.ExpiresAt, time.Minute)

	// The stored token is the long-lived one, sealed.
	tok, _, _, err := f.svc.token(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Equal(t, f.fake.LongLived()[0], tok)
	raw, err := f.st.Get(ctx, credKey("acct_a", c.ID))
	require.NoError(t, err)
	f.noTokens(t, "the stored credentials", raw.Data)

	a, err := f.svc.GetAssets(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	require.Len(t, a.Pages, 2, "paging followed (page size 1)")
	assert.Equal(t, "page:"+metafake.PageID, a.Pages[0].ID)
	assert.Contains(t, a.Pages[0].Tasks, "MESSAGING")
	require.Len(t, a.InstagramAccounts, 1)
	assert.Equal(t, metafake.InstagramUser, a.InstagramAccounts[0].Username)
	assert.Equal(t, "page:"+metafake.PageID, a.InstagramAccounts[0].ParentID)
	require.Len(t, a.WhatsAppBusinessAccounts, 1)
	w := a.WhatsAppBusinessAccounts[0]
	assert.Equal(t, "waba:"+metafake.WABAID, w.ID)
	require.Len(t, w.PhoneNumbers, 2)
	assert.Equal(t, metafake.DisplayPhoneNumber, w.PhoneNumbers[0].DisplayPhoneNumber)
	assert.Equal(t, "VERIFIED", w.PhoneNumbers[0].CodeVerificationStatus)
	assert.False(t, a.Truncated)

	// The refresh job is started at once (it reschedules itself for when the token is due).
	require.Len(t, f.queue.Sent(), 1)
	assert.Zero(t, f.queue.Sent()[0].Delay)

	list, next, err := f.svc.List(ctx, "acct_a", 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, list, 1)
	_, err = f.svc.Get(ctx, "acct_b", c.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "another account's connection")
}

func TestStateSingleUseAndExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	st, err := f.svc.Start(ctx, f.owner)
	require.NoError(t, err)
	q, err := crmfake.Consent(st.AuthorizeURL)
	require.NoError(t, err)
	_, _, err = f.svc.Callback(ctx, q)
	require.NoError(t, err)
	_, actor, err := f.svc.Callback(ctx, q)
	assert.Equal(t, "invalid_state", httpapi.AsError(err).Code, "the state is single-use")
	assert.Nil(t, actor)

	st, err = f.svc.Start(ctx, f.owner)
	require.NoError(t, err)
	q, err = crmfake.Consent(st.AuthorizeURL)
	require.NoError(t, err)
	f.clock.Advance(StateTTL)
	_, actor, err = f.svc.Callback(ctx, q)
	assert.Equal(t, "invalid_state", httpapi.AsError(err).Code, "older than 5 minutes")
	assert.Nil(t, actor)
	c, err := f.svc.Get(ctx, "acct_a", st.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, c.Status)
	assert.Equal(t, "authorization_timeout", c.FailureReason)

	_, _, err = f.svc.Callback(ctx, url.Values{"state": {"forged"}, "code": {"x"}})
	assert.Equal(t, "invalid_state", httpapi.AsError(err).Code)
}

func TestDeniedAndUnconfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.fake.Deny(true)
	st, err := f.svc.Start(ctx, f.owner)
	require.NoError(t, err)
	q, err := crmfake.Consent(st.AuthorizeURL)
	require.NoError(t, err)
	_, actor, err := f.svc.Callback(ctx, q)
	require.NotNil(t, actor)
	e := httpapi.AsError(err)
	assert.Equal(t, "oauth_denied", e.Code)
	assert.Equal(t, "user_denied", e.Extensions["provider_error"])
	c, err := f.svc.Get(ctx, "acct_a", st.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, c.Status)
	assert.Equal(t, "user_denied", c.FailureReason)

	f.svc.settings.AppSecret = ""
	_, err = f.svc.Start(ctx, f.owner)
	assert.Equal(t, "meta_not_configured", httpapi.AsError(err).Code)
}

func TestStartLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	clock := httpapitest.NewClock(t0, 0)
	f.svc.limiter = ratelimit.New(f.st, clock.Now)
	for range 3 {
		_, err := f.svc.Start(ctx, f.owner)
		require.NoError(t, err)
	}
	_, err := f.svc.Start(ctx, f.owner)
	assert.Equal(t, "rate_limited", httpapi.AsError(err).Code)
	clock.Advance(time.Minute)
	_, err = f.svc.Start(ctx, f.owner)
	assert.NoError(t, err)
}

func TestPagingBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc.maxPages = 1
	c := f.connect(t)
	assert.Equal(t, 1, c.AssetCounts.Pages, "one page of one page read")
	a, err := f.svc.GetAssets(context.Background(), "acct_a", c.ID)
	require.NoError(t, err)
	assert.True(t, a.Truncated)
}

func TestSelectionAndAttach(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	a, err := f.svc.GetAssets(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	phone := "phone:" + metafake.PhoneNumberID

	_, err = f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: phone, BotID: f.bot})
	assert.Equal(t, "asset_not_selected", httpapi.AsError(err).Code)

	rev := a.Revision
	_, err = f.svc.Select(ctx, "acct_a", c.ID, SelectionRequest{AssetIDs: []string{"phone:1"}, ExpectedRevision: &rev})
	assert.Equal(t, "validation_failed", httpapi.AsError(err).Code, "an unknown asset")
	stale := rev + 5
	_, err = f.svc.Select(ctx, "acct_a", c.ID, SelectionRequest{AssetIDs: []string{phone}, ExpectedRevision: &stale})
	assert.Equal(t, "stale_revision", httpapi.AsError(err).Code)
	a, err = f.svc.Select(ctx, "acct_a", c.ID, SelectionRequest{AssetIDs: []string{phone, "page:" + metafake.PageID, "ig:" + metafake.InstagramID}, ExpectedRevision: &rev})
	require.NoError(t, err)
	assert.Equal(t, rev+1, a.Revision)
	assert.True(t, a.WhatsAppBusinessAccounts[0].PhoneNumbers[0].Selected)

	for _, id := range []string{"page:" + metafake.PageID, "ig:" + metafake.InstagramID} {
		_, err = f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: id, BotID: f.bot})
		assert.Equal(t, "channel_kind_unsupported", httpapi.AsError(err).Code, id)
	}
	_, err = f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: phone, BotID: ids.At("bot", t0)})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "another account's bot")
	viewer := *f.owner
	viewer.Role, viewer.BotRights = auth.RoleMember, nil
	_, err = f.svc.Attach(ctx, &viewer, c.ID, AttachRequest{AssetID: phone, BotID: f.bot})
	assert.Equal(t, "missing_right", httpapi.AsError(err).Code)

	ch, err := f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: phone, BotID: f.bot, Name: "Support line"})
	require.NoError(t, err)
	require.Len(t, f.chans.creds, 1)
	assert.Equal(t, whatsapp.Credentials{AccessToken: f.fake.LongLived()[0], PhoneNumberID: metafake.PhoneNumberID,
		BusinessAccountID: metafake.WABAID}, f.chans.creds[0])
	a, err = f.svc.GetAssets(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Equal(t, ch.ID, a.WhatsAppBusinessAccounts[0].PhoneNumbers[0].ChannelID)
	assert.Equal(t, f.bot, a.WhatsAppBusinessAccounts[0].PhoneNumbers[0].BotID)
	_, err = f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: phone, BotID: f.bot})
	assert.Equal(t, "asset_attached", httpapi.AsError(err).Code)

	// Its channel disconnected (or its bot deleted), the asset can be attached again.
	f.chans.disconnect(ch.ID)
	again, err := f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: phone, BotID: f.bot})
	require.NoError(t, err)
	assert.Len(t, f.chans.creds, 2)
	a, err = f.svc.GetAssets(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Equal(t, again.ID, a.WhatsAppBusinessAccounts[0].PhoneNumbers[0].ChannelID)
}

func TestCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.fake.Decline("instagram_manage_messages")
	c := f.connect(t)
	res, err := f.svc.Check(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"instagram_manage_messages"}, res.MissingPermissions)
	assert.Equal(t, []string{"instagram_manage_messages"}, res.DeclinedPermissions)
	byID := map[string]AssetCheck{}
	for _, a := range res.Assets {
		byID[a.ID] = a
	}
	assert.True(t, byID["page:"+metafake.PageID].OK)
	assert.Equal(t, []string{"messaging_task_missing"}, byID["page:"+metafake.OtherPageID].Problems)
	assert.Equal(t, []string{"missing_permission:instagram_manage_messages"}, byID["ig:"+metafake.InstagramID].Problems)
	assert.True(t, byID["phone:"+metafake.PhoneNumberID].OK)
	assert.Equal(t, []string{"phone_not_verified"}, byID["phone:"+metafake.UnverifiedPhoneID].Problems)

	f.fake.RejectToken(f.fake.LongLived()[0])
	_, err = f.svc.Check(ctx, "acct_a", c.ID)
	assert.Equal(t, "meta_token_rejected", httpapi.AsError(err).Code)
	got, err := f.svc.Get(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusExpired, got.Status)
}

func TestRefresh(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	payload := f.chainPayload(t, c.ID)

	// Not due: rescheduled for 7 days before the expiry.
	_, done, err := f.svc.RefreshStep(ctx, payload, "")
	require.NoError(t, err)
	assert.True(t, done)
	msgs := f.queue.Sent()
	require.Len(t, msgs, 2)
	assert.InDelta(t, (53 * 24 * time.Hour).Seconds(), msgs[1].Delay.Seconds(), 60)

	// The same step delivered again (queues deliver at least once) ends: the chain was
	// handed on, and is not doubled.
	_, done, err = f.svc.RefreshStep(ctx, payload, "")
	require.NoError(t, err)
	assert.True(t, done)
	assert.Len(t, f.queue.Sent(), 2, "no second next step")

	// Due: exchanged, sealed, the connection's expiry moved, the next run scheduled.
	f.clock.Advance(54 * 24 * time.Hour)
	payload = f.chainPayload(t, c.ID)
	_, done, err = f.svc.RefreshStep(ctx, payload, "")
	require.NoError(t, err)
	assert.True(t, done)
	require.Len(t, f.fake.LongLived(), 2)
	tok, _, _, err := f.svc.token(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Equal(t, f.fake.LongLived()[1], tok)
	got, err := f.svc.Get(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.True(t, got.ExpiresAt.After(*c.ExpiresAt))
	assert.True(t, got.RefreshedAt.After(*c.RefreshedAt))
	require.Len(t, f.queue.Sent(), 3)

	// Refused (code 190): expired, and no further run.
	f.fake.RejectToken(tok)
	f.clock.Advance(54 * 24 * time.Hour)
	payload = f.chainPayload(t, c.ID)
	_, done, err = f.svc.RefreshStep(ctx, payload, "")
	require.NoError(t, err)
	assert.True(t, done)
	got, err = f.svc.Get(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusExpired, got.Status)
	assert.Equal(t, "token_rejected", got.FailureReason)
	assert.Len(t, f.queue.Sent(), 3)

	// A deleted connection ends the job.
	require.NoError(t, f.svc.Delete(ctx, "acct_a", c.ID))
	_, done, err = f.svc.RefreshStep(ctx, payload, "")
	assert.NoError(t, err)
	assert.True(t, done)
}

// A refreshed token reaches the channels attached with the old one; a failure to pass it
// on is retried (the step fails, and its retry passes it on before anything else).
func TestRefreshPassesTheTokenOnToAttachedChannels(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	ch := f.attach(t, c.ID)
	payload := f.chainPayload(t, c.ID)

	_, done, err := f.svc.RefreshStep(ctx, payload, "")
	require.NoError(t, err)
	assert.True(t, done)
	_, replaced := f.chans.replacedOf(ch.ID)
	assert.False(t, replaced, "the channel holds the current token: nothing to pass on")

	f.clock.Advance(54 * 24 * time.Hour)
	f.chans.setDown(true)
	payload = f.chainPayload(t, c.ID) // the step the first one handed the chain on to
	_, done, err = f.svc.RefreshStep(ctx, payload, "")
	require.Error(t, err, "WhatsApp unreachable: the queue retries the step")
	assert.False(t, done)
	require.Len(t, f.fake.LongLived(), 2, "the token was refreshed and stored")
	scheduled := len(f.queue.Sent())

	f.chans.setDown(false)
	_, done, err = f.svc.RefreshStep(ctx, payload, "")
	require.NoError(t, err)
	assert.True(t, done)
	got, ok := f.chans.replacedOf(ch.ID)
	require.True(t, ok, "the retry passed the new token on")
	assert.Equal(t, whatsapp.Credentials{AccessToken: f.fake.LongLived()[1], PhoneNumberID: metafake.PhoneNumberID,
		BusinessAccountID: metafake.WABAID}, got)
	assert.Len(t, f.fake.LongLived(), 2, "and did not refresh again")
	assert.Len(t, f.queue.Sent(), scheduled+1, "one next run scheduled")

	// A channel disconnected since is forgotten by the next pass.
	f.chans.disconnect(ch.ID)
	f.clock.Advance(54 * 24 * time.Hour)
	payload = f.chainPayload(t, c.ID)
	_, done, err = f.svc.RefreshStep(ctx, payload, "")
	require.NoError(t, err)
	assert.True(t, done)
	a, err := f.svc.GetAssets(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	assert.Empty(t, a.WhatsAppBusinessAccounts[0].PhoneNumbers[0].ChannelID)
}

func TestDeleteRevokes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	require.NoError(t, f.svc.Delete(ctx, "acct_a", c.ID))
	assert.Equal(t, 1, f.fake.Revocations())
	_, err := f.st.Get(ctx, credKey("acct_a", c.ID))
	assert.True(t, errors.Is(err, store.ErrNotFound), "the sealed token is gone")
	_, err = f.svc.Get(ctx, "acct_a", c.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
}

// A connection whose token an attached channel holds is not deleted (the revocation would
// cut the channel off) until the channel is disconnected.
func TestDeleteRefusedWhileChannelsAttached(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	ch := f.attach(t, c.ID)

	err := f.svc.Delete(ctx, "acct_a", c.ID)
	e := httpapi.AsError(err)
	require.Equal(t, "connection_in_use", e.Code, "%v", err)
	assert.Equal(t, httpapi.KindConflict, e.Kind)
	assert.Equal(t, []string{ch.ID}, e.Extensions["channel_ids"])
	assert.Zero(t, f.fake.Revocations(), "nothing revoked")
	_, err = f.svc.Get(ctx, "acct_a", c.ID)
	require.NoError(t, err, "the connection stays")
	_, _, _, err = f.svc.token(ctx, "acct_a", c.ID)
	require.NoError(t, err, "and its token")

	f.chans.disconnect(ch.ID)
	require.NoError(t, f.svc.Delete(ctx, "acct_a", c.ID), "the channel gone, nothing holds the token")
	assert.Equal(t, 1, f.fake.Revocations())
}

// A connection deleted while a number is being attached: the delete saw no attachment and
// revoked the token, so the channel just connected with it is disconnected again and the
// attachment answered 404.
func TestDeleteWhileAttaching(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	phone := f.selectPhone(t, c.ID)
	f.chans.connecting = func() { require.NoError(t, f.svc.Delete(ctx, "acct_a", c.ID)) }
	_, err := f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: phone, BotID: f.bot})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "%v", err)
	assert.Equal(t, 1, f.fake.Revocations())
	f.chans.mu.Lock()
	defer f.chans.mu.Unlock()
	assert.Len(t, f.chans.gone, 1, "the channel was disconnected again")
}

// conflictingStore is a store on which every conditional write on a revision loses to a
// concurrent one while conflict is set: the race no HTTP test provokes at will.
type conflictingStore struct {
	store.Store
	conflict atomic.Bool
}

func (s *conflictingStore) racing(conds ...store.Condition) bool {
	if !s.conflict.Load() {
		return false
	}
	for _, c := range conds {
		if c.Kind == store.CondRevisionIs {
			return true
		}
	}
	return false
}

func (s *conflictingStore) Put(ctx context.Context, it store.Item, cond store.Condition) error {
	if s.racing(cond) {
		return &store.ConditionError{}
	}
	return s.Store.Put(ctx, it, cond)
}

func (s *conflictingStore) Transact(ctx context.Context, ws []store.Write) error {
	var conds []store.Condition
	for _, w := range ws {
		conds = append(conds, w.Cond)
	}
	if s.racing(conds...) {
		return &store.ConditionError{}
	}
	return s.Store.Transact(ctx, ws)
}

// 409 concurrent_update: a check whose writes lose every retry, a delete whose connection
// changed under it.
func TestConcurrentUpdate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	st := &conflictingStore{Store: f.st}
	f.svc.store = st
	c := f.connect(t)

	st.conflict.Store(true)
	_, err := f.svc.Check(ctx, "acct_a", c.ID)
	assert.Equal(t, "concurrent_update", httpapi.AsError(err).Code, "%v", err)
	err = f.svc.Delete(ctx, "acct_a", c.ID)
	assert.Equal(t, "concurrent_update", httpapi.AsError(err).Code, "%v", err)
	assert.Zero(t, f.fake.Revocations(), "a delete that did not happen revokes nothing")

	st.conflict.Store(false)
	require.NoError(t, f.svc.Delete(ctx, "acct_a", c.ID))
}

// A connection that never had assets answers 409 connection_not_active with its status.
func TestNotActive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	st, err := f.svc.Start(ctx, f.owner)
	require.NoError(t, err)
	rev := int64(1)
	_, errAssets := f.svc.GetAssets(ctx, "acct_a", st.ID)
	_, errSelect := f.svc.Select(ctx, "acct_a", st.ID, SelectionRequest{AssetIDs: []string{}, ExpectedRevision: &rev})
	_, errCheck := f.svc.Check(ctx, "acct_a", st.ID)
	_, errAttach := f.svc.Attach(ctx, f.owner, st.ID, AttachRequest{AssetID: "phone:" + metafake.PhoneNumberID, BotID: f.bot})
	for i, err := range []error{errAssets, errSelect, errCheck, errAttach} {
		e := httpapi.AsError(err)
		assert.Equal(t, "connection_not_active", e.Code, "#%d: %v", i, err)
		assert.Equal(t, StatusPending, e.Extensions["state"], "#%d", i)
	}
	require.NoError(t, f.svc.Delete(ctx, "acct_a", st.ID), "nothing attached, nothing to revoke")
	assert.Zero(t, f.fake.Revocations())
}

// Every response type marshalled with a token in reach holds none, nor do the errors.
func TestTokenNeverSerialized(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	st, err := f.svc.Start(ctx, f.owner)
	require.NoError(t, err)
	q, err := crmfake.Consent(st.AuthorizeURL)
	require.NoError(t, err)
	c, _, err := f.svc.Callback(ctx, q)
	require.NoError(t, err)
	a, err := f.svc.GetAssets(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	phone := "phone:" + metafake.PhoneNumberID
	a, err = f.svc.Select(ctx, "acct_a", c.ID, SelectionRequest{AssetIDs: []string{phone}, ExpectedRevision: &a.Revision})
	require.NoError(t, err)
	ch, err := f.svc.Attach(ctx, f.owner, c.ID, AttachRequest{AssetID: phone, BotID: f.bot})
	require.NoError(t, err)
	chk, err := f.svc.Check(ctx, "acct_a", c.ID)
	require.NoError(t, err)
	for name, v := range map[string]any{"started": st, "connection": c, "assets": a, "channel": ch, "check": chk} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		f.noTokens(t, name, b)
	}
	// Errors of Graph calls made with the token hold none either (no URL, no message).
	tok := f.fake.LongLived()[0]
	f.fake.RejectToken(tok)
	_, err = f.svc.Check(ctx, "acct_a", c.ID)
	require.Error(t, err)
	f.noTokens(t, "an error", []byte(err.Error()))
	_, _, err = f.svc.graph.exchange(ctx, tok, t0)
	require.Error(t, err)
	f.noTokens(t, "an exchange error", []byte(err.Error()))
	bad := &graph{base: "http://127.0.0.1:1/v21.0", appID: metafake.AppID, appSecret: metafake.AppSecret, http: f.svc.graph.http}
	_, _, err = bad.exchange(ctx, tok, t0)
	require.Error(t, err)
	f.noTokens(t, "a transport error", []byte(err.Error()))
}

func TestNextRefresh(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		want     time.Duration
	}{
		{"60 days: 7 days before", 60 * 24 * time.Hour, 53 * 24 * time.Hour},
		{"6 days: a day later, not at once", 6 * 24 * time.Hour, 24 * time.Hour},
		{"10 hours: half of it", 10 * time.Hour, 5 * time.Hour},
		{"expired: now", -time.Hour, 0},
	} {
		assert.Equal(t, tc.want, nextRefresh(t0, t0.Add(tc.lifetime)), tc.name)
	}
}
