package webpush

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel/httpclient"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/pushendpoint"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func enable(t *testing.T, f *fixture) Settings {
	t.Helper()
	st, created, err := f.svc.Enable(t.Context(), f.bot, Enable{Subject: ptr("mailto:push@shop.example"),
		NavigationOrigins: &[]string{"https://shop.example"}})
	require.NoError(t, err)
	require.True(t, created)
	return st
}

func TestEnableMakesKeysOnceAndSealsThePrivateKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, _, err := f.svc.Enable(ctx, f.bot, Enable{})
	assert.Equal(t, []string{"subject"}, httpapitest.InvalidFields(t, err), "the first enable needs a subject")

	first := enable(t, f)
	assert.True(t, first.Enabled)
	assert.Len(t, first.VAPIDPublicKey, 87, "an uncompressed P-256 point, base64url")
	assert.Equal(t, 1, first.KeyVersion)
	assert.Equal(t, int64(1), first.Revision)

	again, created, err := f.svc.Enable(ctx, f.bot, Enable{})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, first, again, "a second enable that changes nothing is the same configuration, same revision")

	changed, _, err := f.svc.Enable(ctx, f.bot, Enable{Subject: ptr("https://shop.example/contact")})
	require.NoError(t, err)
	assert.Equal(t, first.VAPIDPublicKey, changed.VAPIDPublicKey, "keys are kept")
	assert.Equal(t, int64(2), changed.Revision)

	// The private key is stored sealed: neither it nor its plaintext shows in the item.
	it, err := f.raw.Get(sqlitetest.Unrecorded(ctx), configKey(f.bot))
	require.NoError(t, err)
	r, err := f.svc.load(ctx, f.bot)
	require.NoError(t, err)
	priv, err := f.svc.privateKey(ctx, f.bot, r)
	require.NoError(t, err)
	assert.NotContains(t, string(it.Data), priv)
	// Bound to the bot: the sealed key does not open for another.
	_, err = f.sealOpen(t, r, "bot_other")
	assert.Error(t, err)

	pub, on, err := f.svc.PublicKey(ctx, f.bot)
	require.NoError(t, err)
	assert.True(t, on)
	assert.Equal(t, first.VAPIDPublicKey, pub)
	pub, on, err = f.svc.PublicKey(ctx, "bot_never")
	require.NoError(t, err)
	assert.False(t, on)
	assert.Empty(t, pub)
}

func (f *fixture) sealOpen(t *testing.T, r record, bot string) ([]byte, error) {
	t.Helper()
	return f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), r.SealedPrivateKey, aad(bot, r.KeyVersion))
}

func TestUpdateChecksRevisionAndFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, err := f.svc.Update(ctx, f.bot, Change{ExpectedRevision: ptr(int64(1)), Enabled: ptr(false)})
	assert.Equal(t, "web_push_not_enabled", httpapitest.AsError(t, err).Code)
	enable(t, f)

	c := Change{ExpectedRevision: ptr(int64(1)), Subject: ptr("ftp://x"), NavigationOrigins: &[]string{"https://a.example/path", "http://b.example"},
		QuietHours: &QuietHours{Enabled: true, Start: "25:00", End: "08:00", Timezone: "Mars/Olympus"}}
	assert.ElementsMatch(t, []string{"subject", "navigation_origins[0]", "navigation_origins[1]", "quiet_hours.start", "quiet_hours.timezone"},
		httpapitest.InvalidFields(t, c.Validate()))

	c = Change{ExpectedRevision: ptr(int64(1)), NavigationOrigins: &[]string{"HTTPS://Shop.Example", "https://shop.example", "http://localhost:3000"},
		QuietHours: &QuietHours{Enabled: true, Start: "22:00", End: "07:30", Timezone: "Europe/Berlin"}, Enabled: ptr(false)}
	require.NoError(t, c.Validate())
	st, err := f.svc.Update(ctx, f.bot, c)
	require.NoError(t, err)
	assert.Equal(t, []string{"https://shop.example", "http://localhost:3000"}, st.NavigationOrigins)
	assert.False(t, st.Enabled)
	assert.Equal(t, int64(2), st.Revision)

	_, err = f.svc.Update(ctx, f.bot, c)
	e := httpapitest.AsError(t, err)
	assert.Equal(t, "stale_revision", e.Code)

	// Enable turns it back on, keeping the rest.
	st, _, err = f.svc.Enable(ctx, f.bot, Enable{})
	require.NoError(t, err)
	assert.True(t, st.Enabled)
	assert.Equal(t, "Europe/Berlin", st.QuietHours.Timezone)
}

func TestRotateKeysNeedsConfirmAndExpiresEverySubscription(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	first := enable(t, f)
	f.subscribe(t, "wps_1")
	f.subscribe(t, "wps_2")

	_, err := f.svc.RotateKeys(ctx, f.bot, false, nil)
	e := httpapitest.AsError(t, err)
	assert.Equal(t, "confirm_required", e.Code)
	assert.Equal(t, http.StatusConflict, e.Status())
	assert.Equal(t, int64(2), e.Extensions["active_subscriptions"])
	st, err := f.svc.Get(ctx, f.bot)
	require.NoError(t, err)
	assert.Equal(t, first, st, "an unconfirmed rotation changes nothing")

	_, err = f.svc.RotateKeys(ctx, f.bot, true, ptr(int64(7)))
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)

	rot, err := f.svc.RotateKeys(ctx, f.bot, true, ptr(int64(1)))
	require.NoError(t, err)
	assert.Equal(t, int64(2), rot.ExpiredSubscriptions)
	assert.NotEqual(t, first.VAPIDPublicKey, rot.VAPIDPublicKey)
	assert.Equal(t, 2, rot.KeyVersion)
	assert.Equal(t, "keys_rotated", f.subs.reason("wps_1"))
	n, err := f.svc.subs.Active(ctx, f.bot)
	require.NoError(t, err)
	assert.Zero(t, n)

	// The new private key opens and is the new public key's pair: a send verifies with it.
	f.subscribe(t, "wps_3")
	out, err := f.svc.TestSend(ctx, f.bot, TestSendRequest{SubscriptionID: "wps_3", DocumentID: "doc_push"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, out.PushStatus)
	got := f.push.received()
	require.Len(t, got, 1)
	assert.Equal(t, rot.VAPIDPublicKey, got[0].key)
}

func TestTestSendDeliversSignedEncryptedMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	st := enable(t, f)
	f.subscribe(t, "wps_1")

	out, err := f.svc.TestSend(ctx, f.bot, TestSendRequest{SubscriptionID: "wps_1", DocumentID: "doc_push"})
	require.NoError(t, err)
	assert.Equal(t, TestSend{MessageID: out.MessageID, SubscriptionID: "wps_1", DocumentID: "doc_push", DocumentVersion: 2,
		PushStatus: http.StatusCreated, SentAt: t0}, out)
	assert.True(t, strings.HasPrefix(out.MessageID, "wpm_"))
	got := f.push.received()
	require.Len(t, got, 1)
	assert.Equal(t, "/push/wps_1", got[0].path)
	assert.Equal(t, st.VAPIDPublicKey, got[0].key)
	assert.Equal(t, "mailto:push@shop.example", got[0].claims["sub"])
	assert.Equal(t, "86400", got[0].header.Get("TTL"))
	assert.Greater(t, got[0].bodyLen, 86, "header (86 bytes) and a record")

	rep, err := f.svc.Report(ctx, f.bot)
	require.NoError(t, err)
	assert.Equal(t, int64(1), rep.Sends.Sent)
	assert.Equal(t, int64(1), rep.Subscriptions.Active)
	assert.Equal(t, int64(3), rep.Receipts.Delivered)
}

func TestTestSendRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	send := func(req TestSendRequest) *httpapi.Error {
		t.Helper()
		_, err := f.svc.TestSend(ctx, f.bot, req)
		require.Error(t, err)
		return httpapitest.AsError(t, err)
	}
	req := TestSendRequest{SubscriptionID: "wps_1", DocumentID: "doc_push"}
	assert.Equal(t, "web_push_not_enabled", send(req).Code)
	enable(t, f)
	f.subscribe(t, "wps_1")

	assert.Equal(t, http.StatusNotFound, send(TestSendRequest{SubscriptionID: "wps_none", DocumentID: "doc_push"}).Status())
	assert.Equal(t, http.StatusNotFound, send(TestSendRequest{SubscriptionID: "wps_1", DocumentID: "doc_none"}).Status())

	// A URL outside the navigation origins is refused before anything is sent.
	f.content["doc_elsewhere"] = Message{DocumentID: "doc_elsewhere", Version: 1, Title: "t", Body: "b", URL: "https://evil.example/x"}
	e := send(TestSendRequest{SubscriptionID: "wps_1", DocumentID: "doc_elsewhere"})
	assert.Equal(t, "navigation_origin_not_allowed", e.Code)

	// Quiet hours, 11:00 to 13:00 UTC, hold the send unless overridden.
	_, err := f.svc.Update(ctx, f.bot, Change{ExpectedRevision: ptr(int64(1)),
		QuietHours: &QuietHours{Enabled: true, Start: "11:00", End: "13:00", Timezone: "UTC"}})
	require.NoError(t, err)
	e = send(req)
	assert.Equal(t, "quiet_hours", e.Code)
	assert.Equal(t, "2026-03-01T13:00:00Z", e.Extensions["quiet_until"])
	req.IgnoreQuietHours = true
	_, err = f.svc.TestSend(ctx, f.bot, req)
	require.NoError(t, err)

	// Disabled: nothing is sent.
	_, err = f.svc.Update(ctx, f.bot, Change{ExpectedRevision: ptr(int64(2)), Enabled: ptr(false)})
	require.NoError(t, err)
	assert.Equal(t, "web_push_disabled", send(req).Code)
	assert.Len(t, f.push.received(), 1)
}

func TestTestSendExpiresGoneSubscriptions(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusGone} {
		f := newFixture(t)
		ctx := t.Context()
		enable(t, f)
		f.subscribe(t, "wps_1")
		f.push.answer(status)
		_, err := f.svc.TestSend(ctx, f.bot, TestSendRequest{SubscriptionID: "wps_1", DocumentID: "doc_push"})
		e := httpapitest.AsError(t, err)
		assert.Equal(t, "subscription_expired", e.Code)
		assert.Equal(t, status, e.Extensions["push_status"])
		assert.Equal(t, "push_service_gone", f.subs.reason("wps_1"))
		rep, err := f.svc.Report(ctx, f.bot)
		require.NoError(t, err)
		assert.Equal(t, int64(1), rep.Sends.Expired)
	}
}

func TestTestSendOtherPushAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	enable(t, f)
	f.subscribe(t, "wps_1")
	for status, code := range map[int]string{
		http.StatusTooManyRequests: "push_service_unavailable", http.StatusBadGateway: "push_service_unavailable",
		http.StatusForbidden: "push_rejected", http.StatusRequestEntityTooLarge: "push_rejected",
	} {
		f.push.answer(status)
		_, err := f.svc.TestSend(ctx, f.bot, TestSendRequest{SubscriptionID: "wps_1", DocumentID: "doc_push"})
		assert.Equal(t, code, httpapitest.AsError(t, err).Code, "status %d", status)
	}
	assert.Empty(t, f.subs.reason("wps_1"), "only 404 and 410 expire")
	rep, err := f.svc.Report(ctx, f.bot)
	require.NoError(t, err)
	assert.Equal(t, int64(4), rep.Sends.Failed)
}

func TestEndpointChecks(t *testing.T) {
	t.Parallel()
	prod := NewPusher(PushOptions{})
	local := NewPusher(PushOptions{AllowLoopback: true})
	for _, c := range []struct {
		endpoint   string
		prod, locl bool
	}{
		{"https://fcm.googleapis.com/fcm/send/abc", true, true},
		{"https://updates.push.services.mozilla.com/wpush/v2/x", true, true},
		{"http://fcm.googleapis.com/fcm/send/abc", false, false},
		{"http://127.0.0.1:9999/notify/x", false, true},
		{"http://localhost:9999/notify/x", false, true},
		{"http://[::1]:9999/notify/x", false, true},
		{"https://10.0.0.1/x", false, false},
		{"https://169.254.169.254/latest/meta-data", false, false},
		{"https://[::ffff:192.168.0.1]/x", false, false},
		{"https://user:pw@push.example/x", false, false},
		{"ftp://push.example/x", false, false},
		{"/relative", false, false},
		{"https://push.example/" + strings.Repeat("a", MaxEndpointLen), false, false},
		// Exactly the bound the customer SDK stores endpoints under: sent to.
		{"https://push.example/" + strings.Repeat("a", pushendpoint.MaxLength-len("https://push.example/")), true, true},
	} {
		assert.Equal(t, c.prod, prod.CheckEndpoint(c.endpoint) == nil, "production: %s", c.endpoint)
		assert.Equal(t, c.locl, local.CheckEndpoint(c.endpoint) == nil, "loopback allowed: %s", c.endpoint)
	}
}

// The name check sees address literals only; the dialer checks the address a name resolves
// to, so a name that resolves into a private network is refused as well.
func TestGuardRefusesPrivateAddressesAtDial(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := guardedClient(false).Get(f.push.URL)
	assert.ErrorIs(t, err, httpclient.ErrNotPublic)
	res, err := guardedClient(true).Get(f.push.URL)
	require.NoError(t, err)
	res.Body.Close()
}

func TestQuietUntil(t *testing.T) {
	t.Parallel()
	berlin := QuietHours{Enabled: true, Start: "22:00", End: "08:00", Timezone: "Europe/Berlin"}
	for _, c := range []struct {
		q     QuietHours
		now   string
		quiet bool
		until string
	}{
		{berlin, "2026-03-01T20:59:00Z", false, ""},
		{berlin, "2026-03-01T21:00:00Z", true, "2026-03-02T07:00:00Z"},
		{berlin, "2026-03-02T06:59:00Z", true, "2026-03-02T07:00:00Z"},
		{berlin, "2026-03-02T07:00:00Z", false, ""},
		{QuietHours{Enabled: true, Start: "09:00", End: "17:00", Timezone: "UTC"}, "2026-03-01T12:00:00Z", true, "2026-03-01T17:00:00Z"},
		{QuietHours{Enabled: false, Start: "00:00", End: "23:59", Timezone: "UTC"}, "2026-03-01T12:00:00Z", false, ""},
	} {
		now, err := time.Parse(time.RFC3339, c.now)
		require.NoError(t, err)
		until, quiet := quietUntil(c.q, now)
		assert.Equal(t, c.quiet, quiet, c.now)
		if c.quiet {
			assert.Equal(t, c.until, until.Format(time.RFC3339), c.now)
		}
	}
}
