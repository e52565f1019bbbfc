package broadcasts

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// sentRow plans one row of broadcast id and moves it to sent as a settled send would, with
// the WhatsApp message index item for a WhatsApp row.
func sentRow(t *testing.T, st store.Store, bot, id, sub string, ch channel.Kind, messageID string, links []string) row {
	t.Helper()
	ctx := sqlitetest.Unrecorded(t.Context())
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	r := row{Recipient: Recipient{ID: recipientID(sub, true), SubscriberID: sub, Channel: string(ch), State: RowPlanned, PlannedAt: now}}
	require.NoError(t, PlanRows(ctx, st, bot, id, []row{r}))
	got, err := st.Get(ctx, rowKey(bot, id, r.ID))
	require.NoError(t, err)
	r, err = decodeRow(got)
	require.NoError(t, err)
	next, err := mutateRow(ctx, st, bot, id, &r, func(n *row) ([]store.Write, error) {
		n.State, n.SentAt, n.MessageID, n.Links = RowSent, &now, messageID, links
		if ch != channel.WhatsApp {
			return nil, nil
		}
		b, err := store.Encode(waMessage{Broadcast: id, Recipient: n.ID})
		if err != nil {
			return nil, err
		}
		return []store.Write{store.PutOp(store.Item{Key: waMsgKey(bot, messageID), Revision: 1, Data: b}, store.Always)}, nil
	})
	require.NoError(t, err)
	return next
}

func count(t *testing.T, st store.Store, bot, id string, ch channel.Kind, name string) int64 {
	t.Helper()
	it, err := st.Get(sqlitetest.Unrecorded(t.Context()), counterKey(bot, id, string(ch), name))
	if err != nil {
		return 0
	}
	return it.Count
}

// WhatsApp's statuses arrive in any order and more than once: each row counts delivered and
// read once, a read before its delivered counts both, a failure after the send moves the row
// to failed (undeliverable) unless it was delivered, and a status of a message no broadcast
// sent changes nothing.
func TestRecordDeliveriesCountsEachRowOnce(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	const bot, id = "bot_1", "bc_1"
	sentRow(t, st, bot, id, "sub_a", channel.WhatsApp, "wamid.A", nil)
	sentRow(t, st, bot, id, "sub_b", channel.WhatsApp, "wamid.B", nil)
	sentRow(t, st, bot, id, "sub_c", channel.WhatsApp, "wamid.C", nil)
	sentRow(t, st, bot, id, "sub_d", channel.WhatsApp, "wamid.D", nil)
	at := time.Date(2026, 11, 26, 9, 1, 0, 0, time.UTC)
	ctx := sqlitetest.As(t.Context(), "webhooks")
	require.NoError(t, RecordDeliveries(ctx, st, bot, []Delivery{
		{MessageID: "wamid.A", Status: Delivered, At: at},
		{MessageID: "wamid.A", Status: Delivered, At: at.Add(time.Second)},
		{MessageID: "wamid.A", Status: Read, At: at.Add(2 * time.Second)},
		{MessageID: "wamid.B", Status: Read, At: at},
		{MessageID: "wamid.B", Status: Delivered, At: at.Add(time.Second)},
		{MessageID: "wamid.C", Status: Undeliverable, At: at},
		{MessageID: "wamid.D", Status: Delivered, At: at},
		{MessageID: "wamid.D", Status: Undeliverable, At: at.Add(time.Second)},
		{MessageID: "wamid.unknown", Status: Read, At: at},
	}))
	require.NoError(t, RecordDeliveries(ctx, st, bot, []Delivery{{MessageID: "wamid.A", Status: Read, At: at.Add(time.Minute)}}))

	assert.EqualValues(t, 3, count(t, st, bot, id, channel.WhatsApp, "engaged#delivered"), "A, B (read first) and D")
	assert.EqualValues(t, 2, count(t, st, bot, id, channel.WhatsApp, "engaged#read"), "A and B")
	assert.EqualValues(t, 3, count(t, st, bot, id, channel.WhatsApp, "state#sent"))
	assert.EqualValues(t, 1, count(t, st, bot, id, channel.WhatsApp, "state#failed"))
	assert.EqualValues(t, 1, count(t, st, bot, id, channel.WhatsApp, "fail#undeliverable"))

	got, err := st.Get(sqlitetest.Unrecorded(t.Context()), rowKey(bot, id, recipientID("sub_a", true)))
	require.NoError(t, err)
	a, err := decodeRow(got)
	require.NoError(t, err)
	require.NotNil(t, a.DeliveredAt)
	require.NotNil(t, a.ReadAt)
	assert.Equal(t, at, *a.DeliveredAt, "the first delivered is kept")
	assert.Equal(t, at.Add(2*time.Second), *a.ReadAt, "the first read is kept")
}

// A second-generation broadcast's link buttons are sent as signed redirects to this row; a
// click answers the button's own URL and counts the row once; a tampered token, another
// kind's token or a link index the row never had is not found.
func TestTrackedLinkButtons(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	signer, err := emaillinks.New([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	s := &Service{d: Deps{Store: st, Links: signer, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)},
		cfg: Config{PublicURL: "https://api.example.com"}}
	const bot, id = "bot_1", "bc_1"

	m := channel.Message{Text: "Sale", Buttons: []channel.Button{
		{Title: "Yes", Payload: "yes"},
		{Title: "Shop", URL: "https://shop.example.com/sale?x=1"},
		{Title: "Docs", URL: "https://docs.example.com/"},
	}}
	orig := m.Buttons
	links := s.track(&m, bot, id, recipientID("sub_a", true))
	assert.Equal(t, []string{"https://shop.example.com/sale?x=1", "https://docs.example.com/"}, links)
	assert.Equal(t, "https://shop.example.com/sale?x=1", orig[1].URL, "the rendered message is not changed in place")
	assert.Equal(t, "yes", m.Buttons[0].Payload)
	require.True(t, strings.HasPrefix(m.Buttons[1].URL, "https://api.example.com/b/c/"), m.Buttons[1].URL)
	sentRow(t, st, bot, id, "sub_a", channel.Telegram, "42", links)

	token := func(u string) string {
		p, err := url.Parse(u)
		require.NoError(t, err)
		return strings.TrimPrefix(p.Path, emaillinks.BroadcastClickPrefix)
	}
	ctx := t.Context()
	for range 2 {
		target, err := s.Click(ctx, token(m.Buttons[2].URL))
		require.NoError(t, err)
		assert.Equal(t, "https://docs.example.com/", target)
	}
	target, err := s.Click(ctx, token(m.Buttons[1].URL))
	require.NoError(t, err)
	assert.Equal(t, "https://shop.example.com/sale?x=1", target)
	assert.EqualValues(t, 1, count(t, st, bot, id, channel.Telegram, "engaged#clicked"), "one recipient, however many clicks")

	tok := token(m.Buttons[1].URL)
	for name, bad := range map[string]string{
		"tampered":     tok[:len(tok)-2] + "AA",
		"another kind": signer.Token(emaillinks.Click, emaillinks.Ref{Bot: bot, Campaign: id, Recipient: recipientID("sub_a", true), Link: 0}),
		"no such link": signer.Token(emaillinks.BroadcastClick, emaillinks.Ref{Bot: bot, Campaign: id, Recipient: recipientID("sub_a", true), Link: 2}),
		"no such row":  signer.Token(emaillinks.BroadcastClick, emaillinks.Ref{Bot: bot, Campaign: id, Recipient: recipientID("sub_b", true), Link: 0}),
	} {
		_, err := s.Click(ctx, bad)
		assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), name)
	}

	untracked := &Service{d: Deps{Store: st, Now: s.d.Now, Log: slog.New(slog.DiscardHandler)}}
	m2 := channel.Message{Buttons: []channel.Button{{Title: "Shop", URL: "https://shop.example.com/"}}}
	assert.Nil(t, untracked.track(&m2, bot, id, "rcp_x"))
	assert.Equal(t, "https://shop.example.com/", m2.Buttons[0].URL, "without a public URL links go as they are")
}

// fixedLimit is an adapter whose number has a messaging limit.
type fixedLimit struct {
	channel.Adapter
	limit int
	calls int
}

func (f *fixedLimit) MessagingLimit(context.Context, channel.Connection) (int, error) {
	f.calls++
	return f.limit, nil
}

// The tier budget is the number's limit less the templates of the last 24 hourly buckets:
// a bucket 24 hours old has left the window; the limit is read again only after tierTTL;
// an unlimited tier or an adapter without tiers is unbounded.
func TestTierBudget(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	// Relative to the real clock: the store drops items whose expiry has passed on it.
	base := time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)
	now := base
	s := &Service{d: Deps{Store: st, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)}}
	const bot = "bot_1"
	ctx := sqlitetest.As(t.Context(), "jobs")
	a := &fixedLimit{limit: 100}

	left, bounded, err := s.tierBudget(ctx, bot, a, channel.Connection{})
	require.NoError(t, err)
	assert.True(t, bounded)
	assert.EqualValues(t, 100, left)

	at := func(d time.Duration) { now = base.Add(d) }
	at(-24 * time.Hour) // out of the window by the time it is read
	require.NoError(t, s.countTemplates(ctx, bot, 50))
	at(-23 * time.Hour) // still in it
	require.NoError(t, s.countTemplates(ctx, bot, 30))
	at(0)
	require.NoError(t, s.countTemplates(ctx, bot, 60))
	left, _, err = s.tierBudget(ctx, bot, a, channel.Connection{})
	require.NoError(t, err)
	assert.EqualValues(t, 10, left, "100 - 30 - 60")
	assert.Equal(t, 1, a.calls, "the limit is cached")

	require.NoError(t, s.countTemplates(ctx, bot, 25))
	left, _, err = s.tierBudget(ctx, bot, a, channel.Connection{})
	require.NoError(t, err)
	assert.EqualValues(t, 0, left, "never below zero")

	a.limit = 0 // moved to TIER_UNLIMITED
	at(tierTTL + time.Minute)
	_, bounded, err = s.tierBudget(ctx, bot, a, channel.Connection{})
	require.NoError(t, err)
	assert.False(t, bounded)
	assert.Equal(t, 2, a.calls, "read again after tierTTL")

	_, bounded, err = s.tierBudget(ctx, bot, struct{ channel.Adapter }{}, channel.Connection{})
	require.NoError(t, err)
	assert.False(t, bounded, "an adapter without tiers")
}
