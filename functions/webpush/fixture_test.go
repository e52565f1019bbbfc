package webpush

import (
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The store operations these tests make must be granted to the webpush Lambda
// (infra/access), and so must exactly the uses of the secrets key they make
// (accesstest.KMSComplete).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "webpush", accesstest.KMSComplete())) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeSubs is the customer SDK's subscriptions.
type fakeSubs struct {
	mu      sync.Mutex
	targets map[string]Target
	expired map[string]string // id -> reason
	list    []Subscription
}

func (f *fakeSubs) add(id string, t Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets[id] = t
}

func (f *fakeSubs) reason(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.expired[id]
}

func (f *fakeSubs) List(context.Context, string, int, string) ([]Subscription, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Subscription{}, f.list...), "", nil
}

func (f *fakeSubs) Target(_ context.Context, _, id string) (Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.targets[id]
	if !ok || f.expired[id] != "" {
		return Target{}, httpapi.NotFound("web push subscription")
	}
	return t, nil
}

func (f *fakeSubs) Expire(_ context.Context, _, id, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.expired[id] == "" {
		f.expired[id] = reason
	}
	return nil
}

func (f *fakeSubs) active() int64 {
	var n int64
	for id := range f.targets {
		if f.expired[id] == "" {
			n++
		}
	}
	return n
}

func (f *fakeSubs) ExpireAll(context.Context, string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.active()
	for id := range f.targets {
		if f.expired[id] == "" {
			f.expired[id] = "keys_rotated"
		}
	}
	return n, nil
}

func (f *fakeSubs) Active(context.Context, string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active(), nil
}

func (f *fakeSubs) Counts(context.Context, string) (SubscriptionCounts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := SubscriptionCounts{Active: f.active(), Expired: int64(len(f.expired))}
	c.Receipts.Delivered = 3
	return c, nil
}

// fakeContent holds published push documents.
type fakeContent map[string]Message

func (c fakeContent) Push(_ context.Context, _, id string) (Message, error) {
	m, ok := c[id]
	if !ok {
		return Message{}, httpapi.NotFound("content document")
	}
	return m, nil
}

// pushService is a push service on 127.0.0.1 that checks what a real one checks of the
// request (aes128gcm, the VAPID JWT's audience and signature by the key in k=) and answers
// status.
type pushService struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	got    []pushed
}

type pushed struct {
	path    string
	header  http.Header
	bodyLen int
	claims  map[string]any
	key     string
}

func newPushService(t *testing.T) *pushService {
	t.Helper()
	p := &pushService{status: http.StatusCreated}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 8192)
		n, _ := r.Body.Read(body)
		claims, key, ok := verifyVAPID(r.Header.Get("Authorization"), "http://"+r.Host)
		p.mu.Lock()
		defer p.mu.Unlock()
		if !ok || r.Header.Get("Content-Encoding") != "aes128gcm" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		p.got = append(p.got, pushed{path: r.URL.Path, header: r.Header.Clone(), bodyLen: n, claims: claims, key: key})
		w.WriteHeader(p.status)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *pushService) answer(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = status
}

func (p *pushService) received() []pushed {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pushed(nil), p.got...)
}

// verifyVAPID checks an RFC 8292 Authorization header: "vapid t=<JWT>, k=<public key>",
// the JWT signed (ES256) by k for audience aud.
func verifyVAPID(h, aud string) (map[string]any, string, bool) {
	rest, ok := strings.CutPrefix(h, "vapid t=")
	if !ok {
		return nil, "", false
	}
	jwt, k, ok := strings.Cut(rest, ", k=")
	if !ok {
		return nil, "", false
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return nil, "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil {
		return nil, "", false
	}
	x, y := elliptic.Unmarshal(elliptic.P256(), raw) //nolint:staticcheck // the uncompressed point, as VAPID sends it
	if x == nil {
		return nil, "", false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return nil, "", false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, "", false
	}
	var claims map[string]any
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if json.Unmarshal(b, &claims) != nil || claims["aud"] != aud {
		return nil, "", false
	}
	return claims, k, true
}

// browserKeys are a subscription's keys as a browser makes them.
func browserKeys(t *testing.T) (p256dh, auth string) {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	a := make([]byte, 16)
	_, _ = rand.Read(a)
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(a)
}

type fixture struct {
	svc     *Service
	raw     *sqlitetest.Store
	clock   *httpapitest.Clock
	bot     string
	subs    *fakeSubs
	content fakeContent
	push    *pushService
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	f := &fixture{raw: raw, clock: c, bot: ids.At("bot", t0),
		subs: &fakeSubs{targets: map[string]Target{}, expired: map[string]string{}},
		content: fakeContent{"doc_push": {DocumentID: "doc_push", Version: 2, Title: "Sale", Body: "Up to 50% off",
			URL: "https://shop.example/sale", Actions: []Action{{Title: "Open", URL: "https://shop.example/"}}}},
		push: newPushService(t)}
	f.svc, err = New(Config{Store: raw, Sealer: secretstest.Wrap(key, kms.PurposeSecrets), Subscriptions: f.subs, Content: f.content,
		Push: NewPusher(PushOptions{AllowLoopback: true}), Limiter: ratelimit.New(raw, c.Now),
		Log: slog.New(slog.DiscardHandler), Now: c.Now})
	require.NoError(t, err)
	return f
}

// subscribe adds an active subscription on the fixture's push service.
func (f *fixture) subscribe(t *testing.T, id string) {
	t.Helper()
	p, a := browserKeys(t)
	f.subs.add(id, Target{Endpoint: f.push.URL + "/push/" + id, P256dh: p, Auth: a})
}

func ptr[T any](v T) *T { return &v }
