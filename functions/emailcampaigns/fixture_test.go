package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/logtest"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newsletter is the published email of the fixture: a tracked link (twice, entity-encoded),
// a link a merge field makes personal, a mailto link and a stylesheet link.
const newsletter = `<html><head><link href="https://cdn.example/s.css" rel="stylesheet"></head><body>` +
	`<p>Hi {{first_name}}</p><a href="https://shop.example/sale?x=1&amp;y=2">Sale</a> ` +
	`<a class="btn" href='https://shop.example/p/{{subscriber_id}}'>Yours</a> <a href="mailto:help@shop.example">Help</a> ` +
	`<A HREF="https://shop.example/sale?x=1&amp;y=2">Again</A> <a data-x="1" href="https://blog.example/">Blog</a></body></html>`

// fakeContent holds email documents: published version numbers and their bodies.
type fakeContent struct {
	mu        sync.Mutex
	published map[string]int
	from      string
	html      string
	renderErr error
	renders   int
}

func (f *fakeContent) Published(_ context.Context, _, doc string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.published[doc]
	switch {
	case !ok:
		return 0, httpapi.NotFound("content document")
	case v == 0:
		return 0, httpapi.E(httpapi.KindConflict, "document_not_published", "the content document has no published version; publish it first")
	}
	return v, nil
}

func (f *fakeContent) Render(_ context.Context, _, doc string, version int, p Person) (Rendered, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renders++
	if f.renderErr != nil {
		return Rendered{}, f.renderErr
	}
	if v := f.published[doc]; v == 0 || version > v {
		return Rendered{}, httpapi.NotFound("content version")
	}
	fill := strings.NewReplacer("{{first_name}}", p.FirstName, "{{subscriber_id}}", p.SubscriberID)
	return Rendered{Subject: fill.Replace("News for {{first_name}}"), HTML: fill.Replace(f.html), Text: fill.Replace("Hi {{first_name}}"),
		From: mail.Address{Name: "Shop", Address: f.from}, ReplyTo: "care@shop.example"}, nil
}

// fakeAudience is a bot's subscribers in order, with their labels.
type fakeAudience struct {
	mu     sync.Mutex
	people []Person
	labels map[string][]string
	gone   map[string]bool
	pages  int
	// readers counts the People calls; reads is how many subscribers each Get asked for.
	readers int
	reads   []int
	// onPage, when set, runs before the n-th Page call (from 1) answers: an error fails it.
	onPage func(n int) error
}

func (f *fakeAudience) matching(labels []string) []Person {
	var out []Person
	for _, p := range f.people {
		if f.gone[p.SubscriberID] {
			continue
		}
		if len(labels) == 0 || slices.ContainsFunc(f.labels[p.SubscriberID], func(l string) bool { return slices.Contains(labels, l) }) {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakeAudience) Page(_ context.Context, _ string, labels []string, limit int, cursor string) ([]Person, string, error) {
	f.mu.Lock()
	f.pages++
	n, hook := f.pages, f.onPage
	f.mu.Unlock()
	if hook != nil {
		if err := hook(n); err != nil {
			return nil, "", err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	all := f.matching(labels)
	from := 0
	if cursor != "" {
		from, _ = strconv.Atoi(cursor)
	}
	to := min(from+limit, len(all))
	next := ""
	if to < len(all) {
		next = strconv.Itoa(to)
	}
	return slices.Clone(all[from:to]), next, nil
}

func (f *fakeAudience) People(context.Context, string) (People, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readers++
	return f, nil
}

func (f *fakeAudience) Get(_ context.Context, ids []string) (map[string]Person, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, len(ids))
	out := map[string]Person{}
	for _, p := range f.people {
		if slices.Contains(ids, p.SubscriberID) && !f.gone[p.SubscriberID] {
			p.Labels = slices.Clone(f.labels[p.SubscriberID])
			out[p.SubscriberID] = p
		}
	}
	return out, nil
}

func (f *fakeAudience) set(id string, change func(*Person)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.people {
		if f.people[i].SubscriberID == id {
			change(&f.people[i])
		}
	}
}

// fakeDomains verifies the domains listed.
type fakeDomains struct {
	mu       sync.Mutex
	verified map[string]bool
	key      *email.Signer
}

func (f *fakeDomains) Signer(_ context.Context, _, from string) (*email.Signer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	domain := from[strings.LastIndexByte(from, '@')+1:]
	if !f.verified[domain] {
		return nil, fmt.Errorf("%s: %w", domain, ErrNotVerified)
	}
	return f.key, nil
}

// fakeSuppressions is the suppression list; it checks the batch bound.
type fakeSuppressions struct {
	mu       sync.Mutex
	list     map[string]string
	maxBatch int
}

func (f *fakeSuppressions) Suppressed(_ context.Context, _ string, addresses []string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxBatch = max(f.maxBatch, len(addresses))
	if len(addresses) > MaxSuppressionBatch {
		return nil, errors.New("too many addresses")
	}
	out := map[string]string{}
	for _, a := range addresses {
		if r, ok := f.list[strings.ToLower(a)]; ok {
			out[strings.ToLower(a)] = r
		}
	}
	return out, nil
}

func (f *fakeSuppressions) add(addr, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list[addr] = reason
}

// sentMail is what the recording mailer was handed.
type sentMail struct {
	Msg  email.Message
	DKIM *email.Signer
}

// recMailer records messages. before runs ahead of the recording (a failure there sends
// nothing), after behind it (the message went out).
type recMailer struct {
	mu     sync.Mutex
	sent   []sentMail
	before func(n int, m email.Message) error
	after  func(n int, m email.Message) error
	calls  int
}

func (f *recMailer) Send(_ context.Context, m email.Message, dkim *email.Signer) (email.Receipt, error) {
	f.mu.Lock()
	f.calls++
	n, before, after := f.calls, f.before, f.after
	f.mu.Unlock()
	if before != nil {
		if err := before(n, m); err != nil {
			return email.Receipt{}, err
		}
	}
	f.mu.Lock()
	f.sent = append(f.sent, sentMail{Msg: m, DKIM: dkim})
	f.mu.Unlock()
	if after != nil {
		if err := after(n, m); err != nil {
			return email.Receipt{}, err
		}
	}
	return email.Receipt{MessageID: "ses-" + strings.Trim(m.MessageID, "<>"), Provider: "fake"}, nil
}

func (f *recMailer) all() []sentMail {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

type fixture struct {
	svc *Service
	st  *sqlitetest.Store
	// seen, when set, is the store the service sees instead of st (one that fails).
	seen    store.Store
	clock   *httpapitest.Clock
	bot     string
	content *fakeContent
	aud     *fakeAudience
	domains *fakeDomains
	supp    *fakeSuppressions
	mail    *recMailer
	q       *queuetest.Sender
	jobs    *queue.Mux
	links   *emaillinks.Signer
	events  *eventlogtest.Memory
	logs    *logtest.Buffer // the service's log
	cfg     Config
}

const publicURL = "https://api.example"

func newFixture(t *testing.T, people int, opts ...func(*Config)) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{st: st, clock: c, bot: ids.At("bot", t0),
		content: &fakeContent{published: map[string]int{"doc_news": 3, "doc_draft": 0}, from: "news@shop.example", html: newsletter},
		aud:     &fakeAudience{labels: map[string][]string{}, gone: map[string]bool{}},
		domains: &fakeDomains{verified: map[string]bool{"shop.example": true}, key: &email.Signer{Domain: "shop.example", Selector: "s1"}},
		supp:    &fakeSuppressions{list: map[string]string{}},
		mail:    &recMailer{},
		q:       &queuetest.Sender{},
	}
	for i := range people {
		f.aud.people = append(f.aud.people, Person{SubscriberID: fmt.Sprintf("sub_%05d", i), Email: fmt.Sprintf("p%05d@mail.example", i),
			Consent: true, FirstName: fmt.Sprintf("P%d", i), Name: fmt.Sprintf("P%d Doe", i)})
	}
	var err error
	f.links, err = emaillinks.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	f.cfg = Config{Rate: 20, PublicURL: publicURL, StepDuration: 5 * time.Second}
	for _, o := range opts {
		o(&f.cfg)
	}
	f.events = eventlogtest.NewMemory()
	f.build(t, c.Now, func(_ context.Context, d time.Duration) error { c.Advance(d); return nil })
	return f
}

// build makes f's service on the clock now and sleep (nil: real sleeps), with its job
// runner on f.q.
func (f *fixture) build(t *testing.T, now func() time.Time, sleep func(context.Context, time.Duration) error) {
	t.Helper()
	ob, err := outbox.New(f.st, f.q, outbox.Config{Now: now})
	require.NoError(t, err)
	var log *slog.Logger
	log, f.logs = logtest.Logger()
	var st store.Store = f.st
	if f.seen != nil {
		st = f.seen
	}
	f.svc, err = New(Deps{Store: st, Content: f.content, Audience: f.aud, Domains: f.domains, Suppressions: f.supp, Mail: f.mail,
		Links: f.links, Outbox: ob, Limiter: ratelimit.New(f.st, now), Now: now, Events: f.events, Log: log, Sleep: sleep}, f.cfg)
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	for kind, step := range f.svc.Jobs() {
		reg.Register(kind, step)
	}
	f.jobs = queue.NewMux()
	jobs.NewQueueRunner(f.q, reg).Register(f.jobs)
}

// jobCtx is the context of what the jobs Lambda runs on AWS.
func jobCtx(t *testing.T) context.Context { return sqlitetest.As(t.Context(), "jobs") }

// deliver hands one queued message to the job runner, waiting its delay on the clock
// first as the queue would, and puts it back when it fails (the queue retries). It
// reports whether there was a message.
func (f *fixture) deliver(t *testing.T) (queue.Message, error, bool) {
	t.Helper()
	m, ok := f.q.Pop()
	if !ok {
		return m, nil, false
	}
	f.clock.Advance(m.Delay)
	err := queue.Call(jobCtx(t), f.jobs, m)
	if err != nil {
		require.NoError(t, f.q.Send(t.Context(), m))
	}
	return m, err, true
}

// later requires that the step just delivered stopped for a passing provider failure: the
// same step is queued again to run after retryAfter, and the log says why, naming want.
func (f *fixture) later(t *testing.T, delivered queue.Message, err error, want string) {
	t.Helper()
	require.NoError(t, err, "a passing failure is no failure of the message: never dead-lettered")
	sent := f.q.Sent()
	require.NotEmpty(t, sent)
	again := sent[len(sent)-1]
	assert.Equal(t, retryAfter, again.Delay)
	states := queuetest.Decode[jobs.State](t, []queue.Message{delivered, again})
	assert.Equal(t, states[0].Cursor, states[1].Cursor, "the same step")
	assert.Contains(t, f.logs.String(), want)
}

// drain delivers messages until the queue is empty; failures are retried up to a bound.
func (f *fixture) drain(t *testing.T) {
	t.Helper()
	for range 5000 {
		if _, _, ok := f.deliver(t); !ok {
			return
		}
	}
	t.Fatal("the queue never drained")
}

// create makes a draft of the newsletter for the whole audience.
func (f *fixture) create(t *testing.T, labels ...string) Campaign {
	t.Helper()
	if labels == nil {
		labels = []string{}
	}
	c, err := f.svc.Create(t.Context(), f.bot, Definition{Name: ptr("March news"), ContentID: ptr("doc_news"), Audience: &Segment{LabelIDs: labels}})
	require.NoError(t, err)
	return c
}

// schedule schedules c to send now.
func (f *fixture) schedule(t *testing.T, c Campaign) Campaign {
	t.Helper()
	c, err := f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, nil)
	require.NoError(t, err)
	return c
}

func (f *fixture) get(t *testing.T, id string) Campaign {
	t.Helper()
	c, err := f.svc.Get(t.Context(), f.bot, id)
	require.NoError(t, err)
	return c
}

// rows reads every recipient row of a campaign.
func (f *fixture) rows(t *testing.T, id string) []row {
	t.Helper()
	var out []row
	cursor := ""
	for {
		page, err := f.st.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: dataPK(f.bot, id), Prefix: rowPrefix, Cursor: cursor})
		require.NoError(t, err)
		for _, it := range page.Items {
			r, err := decodeRow(it)
			require.NoError(t, err)
			out = append(out, r)
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// recount counts the rows as the counters count them.
func recount(rows []row) Counts {
	c := newCounts()
	for _, r := range rows {
		switch r.State {
		case RowPlanned:
			c.Planned++
		case RowSending:
			c.Sending++
		case RowSent:
			c.Sent++
		case RowFailed:
			c.Failed++
		case RowInterrupted:
			c.Interrupted++
		case RowCanceled:
			c.Canceled++
		case RowSkipped:
			c.Skipped++
			c.SkippedBy[r.SkipReason]++
		}
		if r.DeliveredAt != nil {
			c.Delivered++
		}
		if r.Opens.FirstAt != nil {
			c.Opened++
		}
		if r.Opens.Machine > 0 {
			c.MachineOpened++
		}
		if len(r.Clicks) > 0 {
			c.Clicked++
		}
		if r.MachineClicks > 0 {
			c.MachineClicked++
		}
		if r.Bounce != nil {
			c.Bounced++
		}
		if r.ComplainedAt != nil {
			c.Complained++
		}
		if r.UnsubscribedAt != nil {
			c.Unsubscribed++
		}
	}
	c.total()
	return c
}

// assertCounts holds the counters equal to a recount of the rows.
func (f *fixture) assertCounts(t *testing.T, id string) Counts {
	t.Helper()
	got, err := f.svc.counts(sqlitetest.Unrecorded(t.Context()), f.bot, id)
	require.NoError(t, err)
	assert.Equal(t, recount(f.rows(t, id)), got, "the counters equal a recount of the rows")
	return got
}

// sentTo counts the messages each address got.
// assertEachOnce asserts that every address the mailer sent to got exactly one message.
func (f *fixture) assertEachOnce(t *testing.T) {
	t.Helper()
	for addr, n := range f.sentTo() {
		assert.Equal(t, 1, n, "%s got %d messages", addr, n)
	}
}

func (f *fixture) sentTo() map[string]int {
	out := map[string]int{}
	for _, m := range f.mail.all() {
		out[m.Msg.To.Address]++
	}
	return out
}

// eventsCtx is the context of what the emailevents Lambda runs on AWS: the tracking routes
// and the provider's events call Record, LinkTarget, ByMessageID and Recipient.
func eventsCtx(t *testing.T) context.Context { return sqlitetest.As(t.Context(), "emailevents") }
