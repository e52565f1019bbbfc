package families

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite"
)

// testClock is a settable clock that starts now.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// outboxWorld is an environment as a process builds it (secrets, so the runtime runs),
// with a clock the test moves and a queue it can take down.
type outboxWorld struct {
	env    *family.Env
	store  *sqlite.Store
	clock  *testClock
	queue  *queuetest.Sender
	mux    *queue.Mux
	acct   string
	owner  string
	token  string
	api    *httpapi.Mux
	bot    string
	logged *strings.Builder
}

func newOutboxWorld(t *testing.T) *outboxWorld {
	t.Helper()
	ctx := t.Context()
	w := &outboxWorld{clock: &testClock{t: time.Now().UTC()}, queue: &queuetest.Sender{}, logged: &strings.Builder{}}
	var err error
	w.store, err = sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(w.clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { w.store.Close() })
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	w.env = familytest.Env(t, family.Deps{Store: w.store, Secrets: key, Queue: w.queue, Now: w.clock.Now, Tenancy: bots.Tenancy})
	composed := family.Compose(w.env, All()...)
	w.mux, err = composed.QueueMux()
	require.NoError(t, err)
	acct, owner, err := w.env.Auth.CreateAccount(ctx, "Acme")
	require.NoError(t, err)
	w.acct, w.owner = acct.ID, owner.ID
	_, w.token, err = w.env.Auth.IssuePAT(ctx, w.acct, w.owner, "t", auth.Scopes{auth.Full}, w.clock.Now().Add(24*time.Hour))
	require.NoError(t, err)
	w.api, err = composed.Mux(httpapi.BearerAuth(w.env.Auth))
	require.NoError(t, err)
	b, err := bots.NewService(w.env.Store, w.env.Auth, w.env.Now).Create(ctx, w.acct, "b", nil)
	require.NoError(t, err)
	w.bot = b.ID
	return w
}

// call makes an API request and returns the status and the decoded body.
func (w *outboxWorld) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+w.token)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	w.api.ServeHTTP(rec, r)
	var out map[string]any
	if rec.Body.Len() > 0 {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	}
	return rec.Code, out
}

// drain handles the messages, and every message they lead to, as the workers would.
func (w *outboxWorld) drain(t *testing.T, msgs []queue.Message) {
	t.Helper()
	for steps := 0; len(msgs) > 0; steps++ {
		require.Less(t, steps, 200)
		m := msgs[0]
		if m.Delay > 0 {
			w.clock.Advance(m.Delay) // the queue would hold it until then
		}
		require.NoError(t, w.mux.HandleMessage(t.Context(), m), m.Type)
		msgs = append(msgs[1:], w.queue.Take()...)
	}
}

// A bot deleted while the queue refuses (or just before the process dies) is deleted, and
// its purge still runs, both passes: the deletion's transaction staged their start, and the
// outbox's sweep sends it once the queue takes messages again.
func TestDeletedBotIsPurgedThroughTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newOutboxWorld(t)
	subs := subscribers.NewService(w.store, w.env.Now, nil)
	for i := range 30 {
		first := fmt.Sprintf("Ann %d", i)
		_, _, err := subs.Upsert(ctx, w.bot, subscribers.ChannelTelegram, fmt.Sprint(i), subscribers.Changes{FirstName: &first})
		require.NoError(t, err)
	}

	w.queue.Fail(errors.New("queue unavailable"))
	status, _ := w.call(t, "DELETE", "/api/bots/"+w.bot, "")
	require.Equal(t, 204, status, "the deletion answers as always")
	status, _ = w.call(t, "GET", "/api/bots/"+w.bot, "")
	require.Equal(t, 404, status)
	left, err := w.store.Mentioning(ctx, w.bot)
	require.NoError(t, err)
	require.NotEmpty(t, left, "the purge has not run yet")

	w.clock.Advance(outbox30s)
	_, err = w.env.Outbox.Sweep(ctx)
	require.Error(t, err, "the queue is still down: the sweep says so (an alarm on AWS)")
	w.queue.Fail(nil)
	res, err := w.env.Outbox.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Delivered)
	started := w.queue.Take()
	require.Len(t, started, 2)
	assert.Zero(t, started[0].Delay)
	assert.Equal(t, purge.SweepDelay-outbox30s, started[1].Delay, "the second pass keeps its time")

	w.drain(t, started)
	left, err = w.store.Mentioning(ctx, w.bot)
	require.NoError(t, err)
	for _, it := range left {
		assert.True(t, strings.HasPrefix(it.PK, "AUDIT#"), "nothing of the deleted bot remains but its audit trail (docs/purge.md), the outbox item included: %s/%s", it.PK, it.SK)
	}
}

// outbox30s is past the outbox's grace.
const outbox30s = 31 * time.Second

// A label added over the API while the queue refuses is added, and its label_added
// reaction still runs: the change's transaction staged the trigger, and the sweep sends it.
func TestLabelAddedOverTheAPIRunsThroughTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	w := newOutboxWorld(t)
	base := "/api/bots/" + w.bot
	status, l := w.call(t, "POST", base+"/labels", `{"name":"VIP"}`)
	require.Equal(t, 201, status)
	label := l["id"].(string)
	rx := reactionswiring.Service(w.env)
	var c reactions.Content
	require.NoError(t, json.Unmarshal([]byte(`{"name":"VIP","trigger":{"type":"label_added","label_id":"`+label+`"},"steps":[{"id":"e","type":"end"}]}`), &c))
	r, err := rx.Create(ctx, w.bot, c)
	require.NoError(t, err)
	_, err = rx.Publish(ctx, w.bot, r.ID, 1)
	require.NoError(t, err)

	w.queue.Fail(errors.New("queue unavailable"))
	status, sub := w.call(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","labels":["`+label+`"]}`)
	require.Equal(t, 201, status, "the change is stored and answered as always")
	assert.Equal(t, []any{label}, sub["labels"])
	subID := sub["id"].(string)
	w.queue.Fail(nil)

	res, err := w.env.Outbox.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.Delivered, "within the grace a request may still be delivering it")
	w.clock.Advance(outbox30s)
	res, err = w.env.Outbox.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Delivered)
	sent := w.queue.Take()
	require.Len(t, sent, 1)
	want, err := runtime.LabelAddedMessage(w.bot, subID, channel.Telegram, label, 1)
	require.NoError(t, err)
	assert.Equal(t, want.Type, sent[0].Type)
	assert.JSONEq(t, string(want.Body), string(sent[0].Body))

	w.drain(t, sent)
	w.drain(t, sent) // delivered twice (at least once): the runtime runs the addition once
	status, runs := w.call(t, "GET", base+"/subscribers/"+subID+"/executions", "")
	require.Equal(t, 200, status)
	list := runs["data"].([]any)
	require.Len(t, list, 1, "the label_added reaction ran, once")
	run := list[0].(map[string]any)
	assert.Equal(t, r.ID, run["reaction_id"])
	assert.Equal(t, map[string]any{"type": "label_added", "reason": "api", "label_id": label}, run["trigger"])

	// With the queue up, the request itself delivers: nothing is left for the sweep.
	status, _ = w.call(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"43","labels":["`+label+`"]}`)
	require.Equal(t, 201, status)
	assert.Len(t, w.queue.Take(), 1)
	w.clock.Advance(time.Hour)
	res, err = w.env.Outbox.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.Delivered)
}
