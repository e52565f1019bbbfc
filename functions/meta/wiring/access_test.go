package wiring

import (
	"context"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/meta"
	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	metafake "github.com/botplatform/api/tests/fakes/meta"
	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

// The store operations these tests make must be granted to the meta Lambda (infra/access),
// and so must exactly the uses of the secrets key they make (accesstest.KMSComplete): the
// tests below run every route that seals or opens a secret, through the family's wiring,
// with the sealers the AWS platform gives it recorded. (The token refresh job runs in the
// jobs Lambda, whose grants the jobs row holds.)
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "meta", accesstest.KMSComplete())) }

// oneBot is the tenancy check of an account with one bot.
type oneBot struct{ account, bot string }

func (o oneBot) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account != o.account || bot != o.bot {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

// wired is the meta family built by its wiring on a recording environment, against the
// Facebook and WhatsApp fakes, for an account with one bot.
type wired struct {
	env      *family.Env
	svc      *meta.Service
	fb       *metafake.Server
	wa       *fakewhatsapp.Server
	owner    *auth.Principal
	bot      string
	beforeWA atomic.Pointer[func()] // runs (once) before the next request to WhatsApp
}

const account = "acct_a"

func newWired(t *testing.T) *wired {
	t.Helper()
	w := &wired{fb: metafake.New(t), wa: fakewhatsapp.New(t), bot: ids.New("bot"),
		owner: &auth.Principal{AccountID: account, UserID: "usr_a", Kind: auth.KindPAT, Role: auth.RoleOwner, Scopes: auth.Scopes{"*"}}}
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	crmKey, err := keyfile.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	client := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		if f := w.beforeWA.Swap(nil); f != nil {
			(*f)()
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	w.env = familytest.Env(t, family.Deps{Secrets: key, CRMSecrets: crmKey, PublicURL: "https://api.example.com",
		Adapters: []channel.Adapter{whatsapp.New(whatsapp.Config{BaseURL: w.wa.URL(), AppID: fakewhatsapp.AppID, HTTPClient: client})},
		Tenancy:  func(*family.Env) httpapi.BotLoader { return oneBot{account, w.bot} }})
	w.svc = Service(w.env, meta.Settings{AppID: metafake.AppID, AppSecret: metafake.AppSecret, RedirectURL: metafake.RedirectURI,
		GraphURL: w.fb.URL(), DialogURL: w.fb.URL()})
	return w
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// connected makes a connection, selects its WhatsApp number and has the WhatsApp Cloud API
// accept its token; it returns the connection's id and the number's asset id.
func (w *wired) connected(t *testing.T) (string, string) {
	t.Helper()
	ctx := t.Context()
	started, err := w.svc.Start(ctx, w.owner)
	require.NoError(t, err)
	q, err := crmfake.Consent(started.AuthorizeURL)
	require.NoError(t, err)
	conn, _, err := w.svc.Callback(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, meta.StatusActive, conn.Status)
	a, err := w.svc.GetAssets(ctx, account, conn.ID)
	require.NoError(t, err)
	phone := "phone:" + metafake.PhoneNumberID
	_, err = w.svc.Select(ctx, account, conn.ID, meta.SelectionRequest{AssetIDs: []string{phone}, ExpectedRevision: &a.Revision})
	require.NoError(t, err)
	for _, long := range w.fb.LongLived() {
		w.wa.AddToken(long, fakewhatsapp.BusinessAccountID)
	}
	return conn.ID, phone
}

// What the meta Lambda does with the secrets key, route by route: the callback seals the
// connection's long-lived token (the integrations' purpose), and the assets, attach and
// delete routes open it; attaching a WhatsApp number connects it through the channels
// family, which seals the channel's credentials (the default purpose).
func TestTheLambdaThroughItsWiring(t *testing.T) {
	t.Parallel()
	w := newWired(t)
	ctx := t.Context()
	id, phone := w.connected(t)
	ch, err := w.svc.Attach(ctx, w.owner, id, meta.AttachRequest{AssetID: phone, BotID: w.bot})
	require.NoError(t, err)
	assert.Equal(t, channel.WhatsApp, ch.Type)

	// The channel holds the connection's token: it goes first (the channels Lambda
	// disconnects it), then the connection, whose token is revoked.
	require.NoError(t, channels.FromEnv(w.env).Disconnect(sqlitetest.As(ctx, "channels"), w.bot, ch.ID))
	require.NoError(t, w.svc.Delete(ctx, account, id))
	assert.Equal(t, 1, w.fb.Revocations())
}

// A connection deleted while one of its numbers is being attached: the attachment undoes the
// channel it made (which opens the channel's credentials, the default purpose, to release
// it with WhatsApp) and answers 404.
func TestAnAttachmentUndoneWhenItsConnectionGoes(t *testing.T) {
	t.Parallel()
	w := newWired(t)
	ctx := t.Context()
	id, phone := w.connected(t)
	del := func() { require.NoError(t, w.svc.Delete(ctx, account, id)) }
	w.beforeWA.Store(&del)
	_, err := w.svc.Attach(ctx, w.owner, id, meta.AttachRequest{AssetID: phone, BotID: w.bot})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	list, _, err := channels.FromEnv(w.env).List(ctx, w.bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, list, "the channel was undone")
}
