package popups

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const shop = "https://shop.example"

// fakeFields is the bot's custom field catalog.
type fakeFields struct {
	mu    sync.Mutex
	names []string
	err   error
	calls int
}

func (f *fakeFields) FieldNames(context.Context, string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.names, f.err
}

// fakeWriter records the form values it is handed.
type fakeWriter struct {
	mu     sync.Mutex
	writes []written
	err    error
}

type written struct {
	bot, visitor string
	values       map[string]string
}

func (w *fakeWriter) WriteFields(_ context.Context, bot, visitor string, values map[string]string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return "", w.err
	}
	w.writes = append(w.writes, written{bot: bot, visitor: visitor, values: maps.Clone(values)})
	return "sub_" + visitor, nil
}

// Subscriber answers for a visitor who has submitted a form.
func (w *fakeWriter) Subscriber(_ context.Context, _, visitor string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.writes {
		if x.visitor == visitor {
			return "sub_" + visitor, nil
		}
	}
	return "", nil
}

func (w *fakeWriter) all() []written {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]written(nil), w.writes...)
}

// zonedBot is the bot the kernel loads in these tests: like bots.Bot, it has a time zone.
type zonedBot string

func (z zonedBot) TimeZone() string { return string(z) }

// zonedBots loads the fixture's bot, in Europe/Berlin, and no other.
type zonedBots struct{ bot string }

func (b zonedBots) LoadBot(_ context.Context, _, bot string) (any, error) {
	if bot != b.bot {
		return nil, httpapi.NotFound("bot")
	}
	return zonedBot("Europe/Berlin"), nil
}

type fixture struct {
	svc    *Service
	raw    *sqlitetest.Store
	clock  *httpapitest.Clock
	bot    string
	fields *fakeFields
	writer *fakeWriter
	events *eventlogtest.Memory
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{raw: raw, clock: c, bot: ids.At("bot", t0),
		fields: &fakeFields{names: []string{"email", "phone", "age", "consent"}}, writer: &fakeWriter{}, events: eventlogtest.NewMemory()}
	f.svc = NewService(raw, f.fields, f.writer, ratelimit.New(raw, c.Now), c.Now, slog.New(slog.DiscardHandler)).WithEvents(f.events)
	return f
}

func ptr[T any](v T) *T { return &v }

// definition is a valid, active popup with a form.
func definition() Definition {
	return Definition{
		Name:   ptr("Newsletter"),
		Status: ptr(StatusActive),
		Content: &Content{Title: "Get 10% off", Body: "Join our list.", ButtonText: "Subscribe",
			Fields: []Field{{Name: "email", Label: "Email", Type: FieldEmail, Required: true}, {Name: "consent", Label: "I agree", Type: FieldCheckbox}}},
		Targeting:      &Targeting{URLRules: []URLRule{{Match: MatchPrefix, Value: shop + "/blog/"}}},
		AllowedOrigins: &[]string{shop},
	}
}

func (f *fixture) create(t *testing.T, d Definition) Popup {
	t.Helper()
	p, err := f.svc.Create(t.Context(), f.bot, d)
	require.NoError(t, err)
	f.clock.Advance(time.Second) // ids sort by creation time
	return p
}

// items returns the live items of a partition.
func (f *fixture) items(t *testing.T, pk string) []store.Item {
	t.Helper()
	page, err := f.raw.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: pk})
	require.NoError(t, err)
	return page.Items
}

var errBoom = errors.New("boom")
