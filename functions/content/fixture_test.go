package content

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeCatalog is a bot's custom fields and the channel types its messages must fit.
type fakeCatalog struct{ cat Catalog }

func (f fakeCatalog) Catalog(context.Context, string) (Catalog, error) { return f.cat, nil }

// fakeRecipients holds a bot's subscribers; testers carry the tester label.
type fakeRecipients struct {
	subs    map[string]Recipient
	testers map[string]bool
}

func (f fakeRecipients) Testers(_ context.Context, _ string, _ int, _ string) ([]Recipient, string, error) {
	out := []Recipient{}
	for id, r := range f.subs {
		if f.testers[id] {
			out = append(out, r)
		}
	}
	return out, "", nil
}

func (f fakeRecipients) Subscriber(_ context.Context, _ string, id string) (Recipient, bool, error) {
	r, ok := f.subs[id]
	if !ok {
		return Recipient{}, false, httpapi.NotFound("subscriber")
	}
	return r, f.testers[id], nil
}

// sentMessage is what the fake messenger received.
type sentMessage struct {
	Bot, Channel, To string
	Msg              channel.Message
}

type fakeMessenger struct {
	mu   sync.Mutex
	sent []sentMessage
	err  error
}

func (f *fakeMessenger) Send(_ context.Context, bot, ch, to string, m channel.Message) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	f.sent = append(f.sent, sentMessage{bot, ch, to, m})
	return fmt.Sprintf("msg-%d", len(f.sent)), nil
}

type fixture struct {
	svc   *Service
	clock *httpapitest.Clock
	bot   string
	msgs  *fakeMessenger
	mail  *email.Sink
	recs  fakeRecipients
	// events is the event log the service publishes into.
	events *eventlogtest.Memory
}

// telegramCaps and whatsappCaps are the two channels' limits as their adapters declare them
// (the parts the checks read).
var (
	telegramCaps = channel.Capabilities{Kind: channel.Telegram, MessageKinds: []string{"text", "media", "buttons"}, MaxTextLength: 4096, MaxCaptionLength: 1024,
		Media:   []channel.MediaLimit{{Type: channel.Image}, {Type: channel.Video}, {Type: channel.Document}},
		Buttons: channel.ButtonLimits{Max: 10, MaxTitleLength: 64, URLButtons: true}}
	whatsappCaps = channel.Capabilities{Kind: channel.WhatsApp, MessageKinds: []string{"text", "media", "buttons", "template"}, MaxTextLength: 4096, MaxCaptionLength: 1024,
		Media:   []channel.MediaLimit{{Type: channel.Image}, {Type: channel.Document}},
		Buttons: channel.ButtonLimits{Max: 3, MaxTitleLength: 20, URLButtons: true, URLButtonAlone: true}}
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{clock: c, bot: ids.At("bot", t0), msgs: &fakeMessenger{}, mail: &email.Sink{Dir: t.TempDir()}}
	first := "Ada"
	f.recs = fakeRecipients{
		subs: map[string]Recipient{
			"sub_tg":   {ID: "sub_tg", FirstName: first, Name: "Ada Lovelace", Channel: "telegram", ExternalID: "777", Fields: map[string]any{"plan": "Pro", "email": "ada@example.com"}, Email: "ada@example.com"},
			"sub_wa":   {ID: "sub_wa", FirstName: "Bo", Name: "Bo", Channel: "whatsapp", ExternalID: "4915", Fields: map[string]any{}},
			"sub_none": {ID: "sub_none", Channel: "telegram", ExternalID: "888"},
		},
		testers: map[string]bool{"sub_tg": true, "sub_wa": true},
	}
	sends := &TestSender{Recipients: f.recs, Messenger: f.msgs, Mail: f.mail, Limiter: ratelimit.New(st, c.Now), Now: c.Now}
	cat := fakeCatalog{Catalog{Fields: []string{"plan", "email"}, Channels: []channel.Capabilities{telegramCaps, whatsappCaps}}}
	f.events = eventlogtest.NewMemory()
	f.svc = NewService(st, cat, sends, c.Now).WithEvents(f.events, slog.New(slog.DiscardHandler))
	return f
}

func raw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
