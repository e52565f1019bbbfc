package customersdk

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/pushendpoint"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const shop = "https://shop.example"

type fixture struct {
	svc   *Service
	clock *httpapitest.Clock
	bot   string
}

func newFixture(t *testing.T, key []byte) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	sealer, err := keyfile.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	return &fixture{svc: NewService(Config{Store: st, Sealer: secretstest.Wrap(sealer, kms.PurposeSecrets), Key: key, Now: c.Now}), clock: c, bot: ids.At("bot", t0)}
}

var sdkKey = []byte("sdk-key-sdk-key-sdk-key-sdk-key-!")

// enabled is a fixture whose bot's project allows shop and an iOS app.
func enabled(t *testing.T) (*fixture, Project, string) {
	t.Helper()
	f := newFixture(t, sdkKey)
	p, secret, created, err := f.svc.Enable(t.Context(), f.bot, Settings{WebOrigins: &[]string{shop}, IOSBundleIDs: &[]string{"com.shop.app"}})
	require.NoError(t, err)
	require.True(t, created)
	return f, p, secret
}

func (f *fixture) register(t *testing.T, p Project) (Installation, string) {
	t.Helper()
	inst, tok, err := f.svc.RegisterInstallation(t.Context(), p, InstallationRequest{Platform: PlatformWeb, AppID: shop, Origin: shop})
	require.NoError(t, err)
	return inst, tok
}

func TestEnableWithoutKeyIs503(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	_, _, _, err := f.svc.Enable(t.Context(), f.bot, Settings{})
	require.Error(t, err)
	assert.Equal(t, httpapi.KindUnavailable, httpapi.KindOf(err))
	assert.Equal(t, "sdk_not_configured", httpapi.AsError(err).Code)
}

func TestEnableTwiceIsIdempotent(t *testing.T) {
	t.Parallel()
	f, p, secret := enabled(t)
	assert.Regexp(t, `^mbs_`, secret)
	assert.Equal(t, 1, p.IdentitySecretVersion)
	p2, secret2, created, err := f.svc.Enable(t.Context(), f.bot, Settings{})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Empty(t, secret2, "the secret is shown once")
	assert.Equal(t, p.ProjectKey, p2.ProjectKey)
	assert.Equal(t, p.Revision, p2.Revision, "nothing changed, nothing written")
	assert.Equal(t, 1, p2.IdentitySecretVersion)
	got, err := f.svc.ProjectByKey(t.Context(), p.ProjectKey)
	require.NoError(t, err)
	assert.Equal(t, f.bot, got.BotID)
}

func TestForgedProjectKeyRefused(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	other := ids.At("bot", t0)
	for _, key := range []string{"", "pk_", p.ProjectKey + "x", "pk_" + other + "." + p.ProjectKey[len("pk_"+f.bot+"."):]} {
		_, err := f.svc.ProjectByKey(t.Context(), key)
		assert.Equal(t, httpapi.KindUnauthenticated, httpapi.KindOf(err), key)
	}
	// Another deployment's key signs differently.
	g := newFixture(t, []byte("another-key-another-key-another-k"))
	_, err := g.svc.ProjectByKey(t.Context(), p.ProjectKey)
	assert.Equal(t, httpapi.KindUnauthenticated, httpapi.KindOf(err))
}

func TestRotatedSecretGraceThenRefused(t *testing.T) {
	t.Parallel()
	f, p, old := enabled(t)
	inst, _ := f.register(t, p)
	p2, fresh, err := f.svc.RotateSecret(t.Context(), f.bot, nil)
	require.NoError(t, err)
	assert.NotEqual(t, old, fresh)
	assert.Equal(t, 2, p2.IdentitySecretVersion)
	require.NotNil(t, p2.PreviousSecretLapsesAt)
	assert.Equal(t, t0.Add(SecretGrace), *p2.PreviousSecretLapsesAt)

	// Within 24 hours both secrets work, each under its own epoch.
	f.clock.Advance(23 * time.Hour)
	_, err = f.svc.Identify(t.Context(), inst, "u1", UserHash(old, "u1"), 1)
	require.NoError(t, err)
	_, err = f.svc.Identify(t.Context(), inst, "u1", UserHash(fresh, "u1"), 2)
	require.NoError(t, err)
	_, err = f.svc.Identify(t.Context(), inst, "u1", UserHash(old, "u1"), 2)
	assert.Equal(t, "invalid_identity", httpapi.AsError(err).Code, "the old secret under the new epoch")
	_, err = f.svc.Identify(t.Context(), inst, "u1", UserHash(old, "u1"), 1)
	require.NoError(t, err)

	// After 24 hours the old one is refused, and an identity made with it lapses.
	f.clock.Advance(time.Hour)
	_, err = f.svc.Identify(t.Context(), inst, "u1", UserHash(old, "u1"), 1)
	assert.Equal(t, "invalid_identity", httpapi.AsError(err).Code)
	list, err := f.svc.Installations(t.Context(), f.bot, 0)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Nil(t, list[0].UserID, "identified under the lapsed secret")
	p3, err := f.svc.Project(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Nil(t, p3.PreviousSecretLapsesAt)
	_, err = f.svc.Identify(t.Context(), inst, "u1", UserHash(fresh, "u1"), 2)
	require.NoError(t, err)
}

func TestRegisterChecksAllowlistAndOrigin(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	tests := []struct {
		name string
		in   InstallationRequest
		kind httpapi.Kind
	}{
		{"foreign origin", InstallationRequest{Platform: PlatformWeb, AppID: "https://evil.example", Origin: "https://evil.example"}, httpapi.KindForbidden},
		{"origin differs from app id", InstallationRequest{Platform: PlatformWeb, AppID: shop, Origin: "https://evil.example"}, httpapi.KindForbidden},
		{"web without origin", InstallationRequest{Platform: PlatformWeb, AppID: shop}, httpapi.KindForbidden},
		{"browser claiming an app", InstallationRequest{Platform: PlatformIOS, AppID: "com.shop.app", Origin: shop}, httpapi.KindForbidden},
		{"unknown bundle", InstallationRequest{Platform: PlatformIOS, AppID: "com.evil.app"}, httpapi.KindForbidden},
		{"bad platform", InstallationRequest{Platform: "tv", AppID: "x"}, httpapi.KindInvalid},
	}
	for _, tt := range tests {
		_, _, err := f.svc.RegisterInstallation(t.Context(), p, tt.in)
		assert.Equal(t, tt.kind, httpapi.KindOf(err), tt.name)
	}
	inst, tok, err := f.svc.RegisterInstallation(t.Context(), p, InstallationRequest{Platform: PlatformIOS, AppID: "com.shop.app"})
	require.NoError(t, err)
	assert.Regexp(t, `^mbi_`, tok)
	kind, ok := auth.ParseToken(tok)
	assert.True(t, ok)
	assert.Equal(t, auth.KindInstallation, kind)
	got, err := f.svc.AuthenticateInstallation(t.Context(), tok)
	require.NoError(t, err)
	assert.Equal(t, inst.ID, got.ID)
}

func TestRevokeRefusesAtOnce(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	inst, tok := f.register(t, p)
	_, err := f.svc.AuthenticateInstallation(t.Context(), tok)
	require.NoError(t, err)
	require.NoError(t, f.svc.RevokeInstallation(t.Context(), f.bot, inst.ID))
	_, err = f.svc.AuthenticateInstallation(t.Context(), tok)
	assert.Equal(t, httpapi.KindUnauthenticated, httpapi.KindOf(err))
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(f.svc.RevokeInstallation(t.Context(), f.bot, inst.ID)))
	c, err := f.svc.Counts(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Zero(t, c.Installations)
	// A PAT is not an installation token.
	_, err = f.svc.AuthenticateInstallation(t.Context(), auth.NewToken(auth.KindPAT))
	assert.Equal(t, httpapi.KindUnauthenticated, httpapi.KindOf(err))
}

func TestInstallationsListCappedAt200(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	var last Installation
	for range 201 {
		last, _ = f.register(t, p)
		f.clock.Advance(time.Millisecond)
	}
	list, err := f.svc.Installations(t.Context(), f.bot, 0)
	require.NoError(t, err)
	assert.Len(t, list, 200)
	assert.Equal(t, last.ID, list[0].ID, "newest first")
	c, err := f.svc.Counts(t.Context(), f.bot)
	require.NoError(t, err)
	assert.EqualValues(t, 201, c.Installations)
}

// A subscription from a browser: P-256 public key and auth secret as PushSubscription gives them.
const (
	p256dh  = "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"
	authKey = "tBHItJI5svbpez7KI4CCXg"
)

func TestWebPushLifecycle(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	inst, _ := f.register(t, p)
	endpoint := "https://push.example/send/abc"
	for _, bad := range []string{"http://push.example/x", "https://push.example/\u00e9", "https://push.example/" + string(make([]byte, MaxEndpointLength)), "not a url"} {
		_, err := f.svc.PutWebPush(t.Context(), inst, bad, p256dh, authKey, "granted")
		assert.Equal(t, httpapi.KindInvalid, httpapi.KindOf(err), bad)
	}
	// Exactly the bound browser push sends under is accepted (shared/pushendpoint).
	_, err := f.svc.PutWebPush(t.Context(), inst, "https://push.example/"+strings.Repeat("a", pushendpoint.MaxLength-len("https://push.example/")), p256dh, authKey, "denied")
	require.NoError(t, err)
	_, err = f.svc.PutWebPush(t.Context(), inst, endpoint, "AAAA", authKey, "granted")
	assert.Equal(t, httpapi.KindInvalid, httpapi.KindOf(err))
	sub, err := f.svc.PutWebPush(t.Context(), inst, endpoint, p256dh, authKey, "granted")
	require.NoError(t, err)
	assert.Equal(t, PushActive, sub.State)
	n, err := f.svc.ActiveWebPush(t.Context(), f.bot)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	e, k, a, err := f.svc.WebPushTarget(t.Context(), f.bot, sub.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{endpoint, p256dh, authKey}, []string{e, k, a})
	list, _, err := f.svc.WebPushSubscriptions(t.Context(), f.bot, 10, "")
	require.NoError(t, err)
	require.Len(t, list, 1)

	// Receipts count once per message and kind.
	for range 2 {
		require.NoError(t, f.svc.RecordReceipt(t.Context(), inst, sub.ID, "delivered", "msg_1"))
	}
	require.NoError(t, f.svc.RecordReceipt(t.Context(), inst, sub.ID, "clicked", "msg_1"))
	c, err := f.svc.Counts(t.Context(), f.bot)
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.Receipts[ReceiptDelivered])
	assert.EqualValues(t, 1, c.Receipts[ReceiptClicked])
	assert.Equal(t, PushCounts{Active: 1}, c.PushTokens[PushWeb])

	require.NoError(t, f.svc.ExpireWebPush(t.Context(), f.bot, sub.ID, "gone"))
	require.NoError(t, f.svc.ExpireWebPush(t.Context(), f.bot, sub.ID, "gone"), "idempotent")
	_, _, _, err = f.svc.WebPushTarget(t.Context(), f.bot, sub.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	c, err = f.svc.Counts(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Equal(t, PushCounts{Expired: 1}, c.PushTokens[PushWeb])

	// Subscribing again reactivates; rotating keys expires all.
	_, err = f.svc.PutWebPush(t.Context(), inst, endpoint, p256dh, authKey, "granted")
	require.NoError(t, err)
	expired, err := f.svc.ExpireAllWebPush(t.Context(), f.bot)
	require.NoError(t, err)
	assert.EqualValues(t, 1, expired)
	n, err = f.svc.ActiveWebPush(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A key rotation expires subscriptions by the transaction-full, and the counters move by
// exactly the number expired, across several transactions and pages.
func TestExpireAllWebPushInBatches(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	const n = 2*(store.MaxTransactWrites-2) + 7
	var subs []WebPushSubscription
	for i := range n {
		inst, _ := f.register(t, p)
		sub, err := f.svc.PutWebPush(t.Context(), inst, fmt.Sprintf("https://push.example/send/%d", i), p256dh, authKey, "granted")
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	// One expired already (its push service said 410): not counted again.
	require.NoError(t, f.svc.ExpireWebPush(t.Context(), f.bot, subs[3].ID, "gone"))

	expired, err := f.svc.ExpireAllWebPush(t.Context(), f.bot)
	require.NoError(t, err)
	assert.EqualValues(t, n-1, expired)
	c, err := f.svc.Counts(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Equal(t, PushCounts{Expired: n}, c.PushTokens[PushWeb])
	for _, sub := range []WebPushSubscription{subs[0], subs[n-1]} {
		_, _, _, err = f.svc.WebPushTarget(t.Context(), f.bot, sub.ID)
		assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	}
	again, err := f.svc.ExpireAllWebPush(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Zero(t, again)
}
