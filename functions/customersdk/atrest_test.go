package customersdk

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// rawItems is every stored item of the bot's SDK partition, and the token lookup of each
// token given, as the table holds them.
func (f *fixture) rawItems(t *testing.T, tokens ...string) []store.Item {
	t.Helper()
	page, err := f.svc.store.Query(t.Context(), store.Query{PK: sdkPK(f.bot)})
	require.NoError(t, err)
	items := page.Items
	for _, tok := range tokens {
		it, err := f.svc.store.Get(t.Context(), tokenKey(auth.HashToken(tok)))
		require.NoError(t, err)
		items = append(items, it)
	}
	return items
}

// assertAbsent fails when any item holds secret: as it is, base64 (how JSON stores bytes)
// or base64url (how browsers give keys), in its data or its keys.
func assertAbsent(t *testing.T, items []store.Item, what string, secret []byte) {
	t.Helper()
	forms := [][]byte{secret, []byte(base64.StdEncoding.EncodeToString(secret)), []byte(base64.RawURLEncoding.EncodeToString(secret))}
	for _, it := range items {
		for _, f := range forms {
			assert.False(t, bytes.Contains(it.Data, f), "%s is stored in the clear in %s/%s", what, it.PK, it.SK)
			assert.NotContains(t, it.PK+it.SK+it.GSI1.PK+it.GSI1.SK, string(f), "%s in a key", what)
		}
	}
}

// The identity secrets are stored sealed, bound to their bot and version: the item holds
// neither the current nor the previous secret, and what it holds opens to them only under
// their own additional data.
func TestIdentitySecretSealedAtRest(t *testing.T) {
	t.Parallel()
	f, _, old := enabled(t)
	_, fresh, err := f.svc.RotateSecret(t.Context(), f.bot, nil)
	require.NoError(t, err)
	items := f.rawItems(t)
	assertAbsent(t, items, "the identity secret", []byte(old))
	assertAbsent(t, items, "the rotated identity secret", []byte(fresh))
	assertAbsent(t, items, "the identity secret's body", []byte(strings.TrimPrefix(fresh, "mbs_")))

	it, err := f.svc.store.Get(t.Context(), projectKey(f.bot))
	require.NoError(t, err)
	rec, err := store.Decode[record](it)
	require.NoError(t, err)
	require.NotEmpty(t, rec.Sealed)
	require.NotEmpty(t, rec.PreviousSealed)
	got, err := f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), rec.Sealed, secretAAD(f.bot, 2))
	require.NoError(t, err)
	assert.Equal(t, fresh, string(got))
	got, err = f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), rec.PreviousSealed, secretAAD(f.bot, 1))
	require.NoError(t, err)
	assert.Equal(t, old, string(got))
	_, err = f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), rec.Sealed, secretAAD(f.bot, 1))
	assert.Error(t, err, "sealed under its version")
	_, err = f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), rec.Sealed, secretAAD("bot_other", 2))
	assert.Error(t, err, "sealed under its bot")
}

// An installation token is stored only as its SHA-256: the installation holds the hash,
// the lookup item is keyed by it, and the token itself is nowhere.
func TestInstallationTokenStoredAsHashOnly(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	inst, tok := f.register(t, p)
	items := f.rawItems(t, tok)
	assertAbsent(t, items, "the installation token", []byte(tok))
	assertAbsent(t, items, "the installation token's body", []byte(strings.TrimPrefix(tok, "mbi_")))

	it, err := f.svc.store.Get(t.Context(), instKey(f.bot, inst.ID))
	require.NoError(t, err)
	ir, err := store.Decode[instRecord](it)
	require.NoError(t, err)
	assert.Equal(t, auth.HashToken(tok), ir.TokenHash)
	assert.Regexp(t, `^[0-9a-f]{64}$`, ir.TokenHash)
	lookup, err := f.svc.store.Get(t.Context(), tokenKey(ir.TokenHash))
	require.NoError(t, err)
	var tr map[string]any
	require.NoError(t, json.Unmarshal(lookup.Data, &tr))
	assert.Equal(t, map[string]any{"bot_id": f.bot, "installation_id": inst.ID}, tr, "the lookup holds where, not what")
	// The API's view of the installation has no token member at all.
	b, err := json.Marshal(inst)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "token")
}

// A web push subscription's endpoint and keys, and an APNs token, are stored sealed under
// their bot and push token id; the record beside them holds only what the API shows.
func TestPushCredentialsSealedAtRest(t *testing.T) {
	t.Parallel()
	f, p, _ := enabled(t)
	inst, _ := f.register(t, p)
	endpoint := "https://push.example/send/the-secret-endpoint-path"
	sub, err := f.svc.PutWebPush(t.Context(), inst, endpoint, p256dh, authKey, "granted")
	require.NoError(t, err)
	app, _, err := f.svc.RegisterInstallation(t.Context(), p, InstallationRequest{Platform: PlatformIOS, AppID: "com.shop.app"})
	require.NoError(t, err)
	apns := strings.Repeat("0a1b2c3d", 8)
	tokRec, err := f.svc.PutMobileToken(t.Context(), app, "apns", apns)
	require.NoError(t, err)

	items := f.rawItems(t)
	assertAbsent(t, items, "the endpoint", []byte(endpoint))
	assertAbsent(t, items, "the endpoint's path", []byte("the-secret-endpoint-path"))
	assertAbsent(t, items, "the p256dh key", []byte(p256dh))
	k, err := decodeKey(p256dh)
	require.NoError(t, err)
	assertAbsent(t, items, "the p256dh key's bytes", k)
	assertAbsent(t, items, "the auth secret", []byte(authKey))
	assertAbsent(t, items, "the APNs token", []byte(apns))

	it, err := f.svc.store.Get(t.Context(), pushKey(f.bot, sub.ID))
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(it.Data, &raw))
	for _, m := range []string{"endpoint", "p256dh", "auth", "keys", "token"} {
		assert.NotContains(t, raw, m, "a clear member %q", m)
	}
	pr, err := store.Decode[pushRecord](it)
	require.NoError(t, err)
	opened, err := f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), pr.Sealed, pushAAD(f.bot, sub.ID))
	require.NoError(t, err)
	var c webPushCredentials
	require.NoError(t, json.Unmarshal(opened, &c))
	assert.Equal(t, webPushCredentials{Endpoint: endpoint, P256dh: p256dh, Auth: authKey}, c)
	_, err = f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), pr.Sealed, pushAAD(f.bot, tokRec.ID))
	assert.Error(t, err, "sealed under its own push token id")

	it, err = f.svc.store.Get(t.Context(), pushKey(f.bot, tokRec.ID))
	require.NoError(t, err)
	pr, err = store.Decode[pushRecord](it)
	require.NoError(t, err)
	opened, err = f.svc.sealer.Open(sqlitetest.Unrecorded(t.Context()), pr.Sealed, pushAAD(f.bot, tokRec.ID))
	require.NoError(t, err)
	assert.Equal(t, apns, string(opened))
}
