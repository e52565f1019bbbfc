package wiring

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/customersdk"
	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The store operations these tests make (the customer SDK's and content's reads and writes,
// through their services) are the webpush Lambda's, and so are their uses of the secrets
// key, which must be exactly its grants on it (accesstest.KMSComplete).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "webpush", accesstest.KMSComplete())) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The adapter over the real customer SDK service: what a device registered is listed
// redacted, opened for a send, counted and expired.
func TestSubscriptionsOverTheCustomerSDK(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := httpapitest.NewClock(t0, time.Second)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	sdk := customersdk.NewService(customersdk.Config{Store: st, Sealer: secretstest.Wrap(key, kms.PurposeSecrets), Key: make([]byte, 32), Region: "local", Now: c.Now,
		Log: slog.New(slog.DiscardHandler)})
	bot := ids.At("bot", t0)
	const origin = "https://shop.example"
	p, _, _, err := sdk.Enable(ctx, bot, customersdk.Settings{WebOrigins: &[]string{origin}})
	require.NoError(t, err)
	inst, _, err := sdk.RegisterInstallation(ctx, p, customersdk.InstallationRequest{Platform: customersdk.PlatformWeb, AppID: origin,
		Origin: origin, Locale: "de-DE", Timezone: "Europe/Berlin", UserAgent: "Mozilla/5.0 Firefox/140.0"})
	require.NoError(t, err)
	const endpoint = "https://updates.push.services.mozilla.com/wpush/v2/secret-part"
	const p256dh = "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"
	const auth = "tBHItJI5svbpez7KI4CCXg"
	tok, err := sdk.PutWebPush(ctx, inst, endpoint, p256dh, auth, "granted")
	require.NoError(t, err)

	subs := Subscriptions{SDK: sdk}
	list, _, err := subs.List(ctx, bot, 50, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, tok.ID, list[0].ID)
	assert.Equal(t, inst.ID, list[0].InstallationID)
	assert.Equal(t, "active", list[0].State)
	assert.Equal(t, "granted", list[0].Consent)
	b, err := json.Marshal(list)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "secret-part")
	assert.NotContains(t, string(b), auth)

	target, err := subs.Target(ctx, bot, tok.ID)
	require.NoError(t, err)
	assert.Equal(t, endpoint, target.Endpoint)
	assert.Equal(t, p256dh, target.P256dh)
	assert.Equal(t, auth, target.Auth)

	n, err := subs.Active(ctx, bot)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	require.NoError(t, subs.Expire(ctx, bot, tok.ID, "push_service_gone"))
	_, err = subs.Target(ctx, bot, tok.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "an expired subscription is not sent to")
	counts, err := subs.Counts(ctx, bot)
	require.NoError(t, err)
	assert.Equal(t, int64(0), counts.Active)
	assert.Equal(t, int64(1), counts.Expired)

	// A bot without an SDK project has nothing subscribed.
	counts, err = subs.Counts(ctx, "bot_without_project")
	require.NoError(t, err)
	assert.Zero(t, counts.Active)
}

// emptyCatalog is a bot without custom fields or channels.
type emptyCatalog struct{}

func (emptyCatalog) Catalog(context.Context, string) (content.Catalog, error) {
	return content.Catalog{}, nil
}

// The adapter over the content service: only a published push document is a message.
func TestContentOverTheContentService(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := httpapitest.NewClock(t0, time.Second)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	// Publishing checks drafts against a catalog; browser push itself reads published
	// versions only (New builds the service without one).
	docs := content.NewService(st, emptyCatalog{}, nil, c.Now)
	bot := ids.At("bot", t0)
	push, err := docs.Create(ctx, bot, content.NewDocument{Type: content.TypePush, Name: "Sale",
		Draft: json.RawMessage(`{"title":"Sale","body":"Up to 50% off","url":"https://shop.example/sale","actions":[{"title":"Open","url":"https://shop.example/"}]}`)})
	require.NoError(t, err)
	cs := Content{Docs: docs}
	_, err = cs.Push(ctx, bot, push.ID)
	assert.Equal(t, "document_not_published", httpapitest.AsError(t, err).Code)
	_, err = docs.Publish(ctx, bot, push.ID, push.Revision)
	require.NoError(t, err)
	m, err := cs.Push(ctx, bot, push.ID)
	require.NoError(t, err)
	assert.Equal(t, "Sale", m.Title)
	assert.Equal(t, "https://shop.example/sale", m.URL)
	assert.Equal(t, 1, m.Version)
	require.Len(t, m.Actions, 1)
	assert.Equal(t, "https://shop.example/", m.Actions[0].URL)

	msg, err := docs.Create(ctx, bot, content.NewDocument{Type: content.TypeMessage, Name: "Hi", Draft: json.RawMessage(`{"text":"Hi"}`)})
	require.NoError(t, err)
	_, err = docs.Publish(ctx, bot, msg.ID, msg.Revision)
	require.NoError(t, err)
	_, err = cs.Push(ctx, bot, msg.ID)
	assert.Equal(t, "unsupported_document_type", httpapitest.AsError(t, err).Code)
}
