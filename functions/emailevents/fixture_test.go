package emailevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/logtest"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var errBoom = errors.New("boom")

// recorded is one event the fake campaigns received.
type recorded struct {
	Ref emaillinks.Ref
	Ev  Event
}

// fakeCampaigns holds one bot's sent campaigns: link tables, recipients' addresses and
// the providers' message ids.
type fakeCampaigns struct {
	mu         sync.Mutex
	links      map[string]string // "<campaign>/<link>" → URL
	recipients map[string]string // recipient id → address
	messages   map[string]emaillinks.Ref
	records    []recorded
	recordErr  error
}

func (f *fakeCampaigns) LinkTarget(_ context.Context, ref emaillinks.Ref) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.links[fmt.Sprintf("%s/%d", ref.Campaign, ref.Link)]
	if !ok {
		return "", httpapi.NotFound("link")
	}
	return u, nil
}

func (f *fakeCampaigns) Record(_ context.Context, ref emaillinks.Ref, ev Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recordErr != nil {
		return f.recordErr
	}
	f.records = append(f.records, recorded{ref, ev})
	return nil
}

func (f *fakeCampaigns) ByMessageID(_ context.Context, id string) (emaillinks.Ref, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref, ok := f.messages[id]
	if !ok {
		return emaillinks.Ref{}, httpapi.NotFound("message")
	}
	return ref, nil
}

func (f *fakeCampaigns) Recipient(_ context.Context, ref emaillinks.Ref) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.recipients[ref.Recipient]
	if !ok {
		return "", httpapi.NotFound("recipient")
	}
	return a, nil
}

func (f *fakeCampaigns) all() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.records...)
}

func (f *fakeCampaigns) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordErr = err
}

type fixture struct {
	svc   *Service
	raw   *sqlitetest.Store
	clock *httpapitest.Clock
	bot   string
	links *emaillinks.Signer
	camps *fakeCampaigns
	logs  *logtest.Buffer
	// ref is a recipient of campaign ecmp_1 with address Ada@Example.com, whose SES
	// message is ses-1 and whose Mailgun message is <mg-1@mg.example>.
	ref emaillinks.Ref
}

const adaAddress = "Ada@Example.com"

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	signer, err := emaillinks.New([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	bot := ids.At("bot", t0)
	ref := emaillinks.Ref{Bot: bot, Campaign: "ecmp_1", Recipient: "rcp_ada"}
	camps := &fakeCampaigns{
		links:      map[string]string{"ecmp_1/0": "https://shop.example/spring?utm_source=email", "ecmp_1/1": "https://shop.example/b"},
		recipients: map[string]string{"rcp_ada": adaAddress, "rcp_bo": "bo@example.com"},
		messages: map[string]emaillinks.Ref{"ses-1": ref, "<mg-1@mg.example>": ref,
			"ses-2": {Bot: bot, Campaign: "ecmp_1", Recipient: "rcp_bo"}},
	}
	logs := &logtest.Buffer{}
	f := &fixture{raw: raw, clock: c, bot: bot, links: signer, camps: camps, logs: logs, ref: ref}
	f.svc = NewService(raw, signer, camps, cfg, c.Now, slog.New(slog.NewTextHandler(logs, nil)))
	return f
}

// server serves the fixture's routes, public and token API, on one kernel mux.
type server struct {
	*fixture
	*httpapitest.Server
}

func newServer(t *testing.T, cfg Config) *server {
	t.Helper()
	f := newFixture(t, cfg)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.raw, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	PublicRoutes(s.Mux, f.svc)
	return &server{fixture: f, Server: s}
}

// suppression reads the stored suppression of address, or nil.
func (f *fixture) suppression(t *testing.T, address string) *Suppression {
	t.Helper()
	got, _, err := f.svc.List(sqlitetest.Unrecorded(t.Context()), f.bot, "", 200, "")
	require.NoError(t, err)
	for _, s := range got {
		if s.Address == address {
			return &s
		}
	}
	return nil
}
