package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// clock is the wall clock shifted by an offset the test moves forward, so leases and ids
// keep their real order while waits can be skipped.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// sent is one message the fake adapter accepted.
type sent struct {
	User string
	Msg  channel.Message
	ID   string
}

// fakeAdapter is a provider that records sends and fails on demand.
type fakeAdapter struct {
	mu       sync.Mutex
	sent     []sent
	calls    int
	keys     []string      // the Key of every Send call, failed ones included
	script   map[int]error // the answer to Send call n (1-based), when an error
	answered []string
	n        int
	// kinds are the message kinds the channel declares (none by default).
	kinds []string
	// dedupe makes it a provider that sends a message once per Key (VK's random_id): a
	// repeated key answers the first message's id and sends nothing.
	dedupe bool
	byKey  map[string]string
	// lose are the Send calls (1-based) that deliver and then lose their answer.
	lose map[int]bool
	// before, when set, is called with each Send's context first.
	before func(ctx context.Context)
}

func (a *fakeAdapter) Kind() channel.Kind { return channel.Telegram }
func (a *fakeAdapter) Capabilities() channel.Capabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return channel.Capabilities{Kind: channel.Telegram, MessageKinds: slices.Clone(a.kinds)}
}
func (a *fakeAdapter) Credentials() any { return &struct{}{} }
func (a *fakeAdapter) Connect(context.Context, channel.ConnectRequest) (channel.ConnectResult, error) {
	return channel.ConnectResult{}, nil
}
func (a *fakeAdapter) Verify(*http.Request, []byte, channel.Connection) error { return nil }
func (a *fakeAdapter) Parse([]byte) ([]channel.Inbound, error)                { return nil, nil }

func (a *fakeAdapter) Send(ctx context.Context, _ channel.Connection, user string, m channel.Message) (string, error) {
	if a.before != nil {
		a.before(ctx)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	a.keys = append(a.keys, m.Key)
	if err := a.script[a.calls]; err != nil {
		return "", err
	}
	if id, ok := a.byKey[m.Key]; ok && a.dedupe && m.Key != "" {
		return id, nil
	}
	a.n++
	id := fmt.Sprintf("m%d", a.n)
	a.sent = append(a.sent, sent{User: user, Msg: m, ID: id})
	if a.byKey == nil {
		a.byKey = map[string]string{}
	}
	a.byKey[m.Key] = id
	if a.lose[a.calls] {
		return "", &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.Telegram, Code: "transport", Message: "connection reset"}
	}
	return id, nil
}

func (a *fakeAdapter) AnswerCallback(_ context.Context, _ channel.Connection, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answered = append(a.answered, id)
	return nil
}

// failCalls makes Send calls n, n+1, ... (1-based, counting every call so far) answer errs.
func (a *fakeAdapter) failCalls(n int, errs ...error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.script == nil {
		a.script = map[int]error{}
	}
	for i, err := range errs {
		a.script[n+i] = err
	}
}

// failNext makes the next sends answer errs.
func (a *fakeAdapter) failNext(errs ...error) {
	a.mu.Lock()
	n := a.calls + 1
	a.mu.Unlock()
	a.failCalls(n, errs...)
}

func (a *fakeAdapter) texts() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []string{}
	for _, s := range a.sent {
		out = append(out, s.Msg.Text)
	}
	return out
}

func (a *fakeAdapter) sendKeys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.keys)
}

func (a *fakeAdapter) last() sent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sent[len(a.sent)-1]
}

// memChannels has one Telegram channel per bot.
type memChannels struct {
	a       *fakeAdapter
	missing bool
}

func (c *memChannels) Open(context.Context, string, channel.Kind) (channel.Adapter, channel.Connection, error) {
	if c.missing {
		return nil, channel.Connection{}, ErrNotFound
	}
	return c.a, channel.Connection{ChannelID: "ch_test"}, nil
}

// memSubs is the subscribers family in memory.
type memSubs struct {
	mu       sync.Mutex
	byID     map[string]*Subscriber
	byIdent  map[string]string
	labels   map[string]bool
	fields   []Field
	now      func() time.Time
	profiles map[string]Profile
	// st is the store the writes an Upsert commits with go to (the runtime's).
	st store.Store
}

func newMemSubs(now func() time.Time, st store.Store) *memSubs {
	return &memSubs{byID: map[string]*Subscriber{}, byIdent: map[string]string{}, labels: map[string]bool{},
		now: now, profiles: map[string]Profile{}, st: st}
}

func (m *memSubs) copyOf(s *Subscriber) Subscriber {
	c := *s
	c.Labels = slices.Clone(s.Labels)
	c.Fields = map[string]any{}
	for k, v := range s.Fields {
		c.Fields[k] = v
	}
	return c
}

// Upsert commits with's writes to m.st, and changes m only once they are committed.
func (m *memSubs) Upsert(ctx context.Context, bot string, k channel.Kind, ext string, p Profile,
	with func(Subscriber, bool) ([]store.Write, error)) (Subscriber, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := bot + "/" + string(k) + "/" + ext
	if p.Locale == "bad" {
		return Subscriber{}, false, ErrInvalid
	}
	commit := func(s *Subscriber, created bool) error {
		if with == nil {
			return nil
		}
		writes, err := with(m.copyOf(s), created)
		if err != nil || len(writes) == 0 {
			return err
		}
		return m.st.Transact(ctx, writes)
	}
	if id, ok := m.byIdent[key]; ok {
		if err := commit(m.byID[id], false); err != nil {
			return Subscriber{}, false, err
		}
		m.profiles[id] = p
		return m.copyOf(m.byID[id]), false, nil
	}
	now := m.now()
	s := &Subscriber{ID: ids.At("sub", now), Channel: k, ExternalID: ext, Fields: map[string]any{}, CreatedAt: now.UTC().Truncate(time.Second)}
	if err := commit(s, true); err != nil {
		return Subscriber{}, false, err
	}
	m.byID[s.ID], m.byIdent[key] = s, s.ID
	m.profiles[s.ID] = p
	return m.copyOf(s), true, nil
}

func (m *memSubs) get(id string) (*Subscriber, error) {
	s, ok := m.byID[id]
	if !ok {
		return nil, ErrNotFound
	}
	return s, nil
}

func (m *memSubs) Get(_ context.Context, _, id string) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Subscriber{}, err
	}
	return m.copyOf(s), nil
}

func (m *memSubs) SetField(_ context.Context, _, id, field string, v any) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Subscriber{}, err
	}
	i := slices.IndexFunc(m.fields, func(f Field) bool { return f.ID == field })
	if i < 0 {
		return Subscriber{}, ErrInvalid
	}
	if v == nil {
		delete(s.Fields, m.fields[i].Name)
	} else {
		s.Fields[m.fields[i].Name] = v
	}
	return m.copyOf(s), nil
}

func (m *memSubs) AddLabel(_ context.Context, _, id, label string) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Subscriber{}, err
	}
	if !m.labels[label] {
		return Subscriber{}, ErrInvalid
	}
	if !slices.Contains(s.Labels, label) {
		s.Labels = append(s.Labels, label)
	}
	return m.copyOf(s), nil
}

func (m *memSubs) RemoveLabel(_ context.Context, _, id, label string) (Subscriber, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return Subscriber{}, err
	}
	s.Labels = slices.DeleteFunc(s.Labels, func(l string) bool { return l == label })
	return m.copyOf(s), nil
}

func (m *memSubs) Fields(context.Context, string) ([]Field, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.fields), nil
}

func (m *memSubs) Labels(context.Context, string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []string{}
	for l := range m.labels {
		out = append(out, l)
	}
	return out, nil
}

func (m *memSubs) only(t *testing.T) Subscriber {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Len(t, m.byID, 1)
	for _, s := range m.byID {
		return m.copyOf(s)
	}
	return Subscriber{}
}

// memReactions is the reactions family in memory: published flows, oldest first.
type memReactions struct {
	mu    sync.Mutex
	list  []Published
	flows map[string]Flow
}

func (m *memReactions) Published(context.Context, string) ([]Published, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.list), nil
}

func (m *memReactions) Flow(_ context.Context, _, id string, v int64) (Flow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.flows[fmt.Sprintf("%s/%d", id, v)]
	if !ok {
		return Flow{}, ErrNotFound
	}
	return f, nil
}

func (m *memReactions) delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.list = slices.DeleteFunc(m.list, func(p Published) bool { return p.ReactionID == id })
	for k := range m.flows {
		if strings.HasPrefix(k, id+"/") {
			delete(m.flows, k)
		}
	}
}

type fixture struct {
	t       *testing.T
	st      store.Store
	clock   *clock
	q       *queuetest.Sender
	adapter *fakeAdapter
	chans   *memChannels
	subs    *memSubs
	rx      *memReactions
	rt      *Runtime
	events  *eventlogtest.Memory
	mux     *queue.Mux
	bot     string
	updates int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := &clock{}
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{t: t, st: st, clock: c, q: &queuetest.Sender{}, adapter: &fakeAdapter{}, subs: newMemSubs(c.Now, st),
		rx: &memReactions{flows: map[string]Flow{}}, bot: ids.New("bot"), events: eventlogtest.NewMemory()}
	f.chans = &memChannels{a: f.adapter}
	rt, err := New(Deps{Store: st, Queue: f.q, Channels: f.chans, Subscribers: f.subs, Reactions: f.rx, Events: f.events,
		Now: c.Now, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	f.rt = rt
	f.mux = queue.NewMux()
	f.rt.Register(f.mux)
	return f
}

// publish adds a published reaction from its docs/reactions.md JSON ({"trigger":..., "steps":...}).
func (f *fixture) publish(js string) string {
	f.t.Helper()
	var fl Flow
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	require.NoError(f.t, dec.Decode(&fl), js)
	fl.ReactionID = ids.At("rct", f.clock.Now())
	fl.Version = 1
	f.rx.mu.Lock()
	defer f.rx.mu.Unlock()
	f.rx.list = append(f.rx.list, Published{ReactionID: fl.ReactionID, Version: 1, Trigger: fl.Trigger})
	f.rx.flows[fl.ReactionID+"/1"] = fl
	return fl.ReactionID
}

func (f *fixture) label() string {
	id := ids.New("lbl")
	f.subs.mu.Lock()
	f.subs.labels[id] = true
	f.subs.mu.Unlock()
	return id
}

func (f *fixture) field(name, typ string) string {
	id := ids.New("fld")
	f.subs.mu.Lock()
	f.subs.fields = append(f.subs.fields, Field{ID: id, Name: name, Type: typ})
	f.subs.mu.Unlock()
	return id
}

// inbound builds the queue message of an update from user 42.
func (f *fixture) inbound(text, payload string) queue.Message {
	f.updates++
	return f.inboundFrom("42", fmt.Sprint(f.updates), text, payload)
}

func (f *fixture) inboundFrom(user, update, text, payload string) queue.Message {
	now := f.clock.Now()
	m, err := queue.New(InboundMessage, channel.Delivery{ChannelID: "ch_test", BotID: f.bot, AccountID: "acct_test", Kind: channel.Telegram,
		Inbound:    channel.Inbound{UpdateID: update, UserID: user, FirstName: "Ann", Locale: "en", Text: text, Payload: payload, At: now},
		ReceivedAt: now})
	require.NoError(f.t, err)
	m.ID, m.Attempt = ids.New("msg"), 1
	return m
}

func (f *fixture) deliver(m queue.Message) error {
	return f.mux.HandleMessage(f.t.Context(), m)
}

// drain delivers what the runtime enqueued (and what that enqueues) that is due now.
func (f *fixture) drain() {
	f.t.Helper()
	for range 50 {
		msgs := f.q.Take()
		if len(msgs) == 0 {
			return
		}
		var later []queue.Message
		for _, m := range msgs {
			if m.Type == ResumeMessage {
				var w wake
				require.NoError(f.t, m.Decode(&w))
				if f.clock.Now().Before(w.Due) {
					later = append(later, m)
					continue
				}
			}
			require.NoError(f.t, f.deliver(m))
		}
		if len(later) > 0 {
			// Held back ahead of what the deliveries enqueued, as the queue keeps them.
			require.NoError(f.t, f.q.Send(f.t.Context(), append(later, f.q.Take()...)...))
			if len(later) == len(msgs) {
				return
			}
		}
	}
	f.t.Fatal("drain: the runtime keeps enqueueing")
}

// runs lists the subscriber's runs, newest first, with their steps.
func (f *fixture) runs(sub string) []Detail {
	f.t.Helper()
	tr := NewTraces(f.st, f.subs, f.clock.Now)
	list, _, err := tr.List(f.t.Context(), f.bot, sub, 200, "")
	require.NoError(f.t, err)
	out := make([]Detail, 0, len(list))
	for _, e := range list {
		d, err := tr.Get(f.t.Context(), f.bot, e.ID)
		require.NoError(f.t, err)
		out = append(out, d)
	}
	return out
}

// counter reads a stats counter of today.
func (f *fixture) counter(metric string) int64 {
	f.t.Helper()
	day := f.clock.Now().UTC().Truncate(24 * time.Hour)
	it, err := f.st.Get(f.t.Context(), store.Key{PK: "STATS#" + f.bot + "#day", SK: day.Format("2006-01-02T15") + "#" + metric + "#telegram"})
	if err != nil {
		return 0
	}
	return it.Count
}
