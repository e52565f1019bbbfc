package tests

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// The fan-out of second-generation broadcasts proven end to end against the fake Telegram:
// a crash mid-send, pause and resume, the provider's 429, test-send's own limit, and a
// subscriber who blocked the bot. Each process sends slowly (BROADCAST_RATE_TELEGRAM), so
// that a pause, a kill or a rate limit lands in the middle of a send.

// fanout is a conversation whose process runs with extra environment (the sending pace),
// kept so that a restart runs with the same.
type fanout struct {
	*conversation
	env []string
	tok string
	api string // /api/bots/{botID}
	// chats maps each subscriber id the test created to its Telegram chat.
	chats map[string]int64
}

// startFanout is startConversation with env ("NAME=value") for the process.
func startFanout(t *testing.T, env ...string) *fanout {
	t.Helper()
	tg := fake.New(t)
	bot := tg.AddBot("shop_bot")
	port := freePort(t)
	c := &conversation{tg: tg, bot: bot, dir: t.TempDir(),
		args: []string{"--addr", "127.0.0.1:" + port, "--public-url", "http://127.0.0.1:" + port, "--telegram-base-url", tg.URL}}
	c.s = startWithEnv(t, c.dir, env, c.args...)
	c.s.secret(bot.Token)
	c.s.admin("channel", "connect", "--bot", c.s.demo.BotID, "--type", "telegram", "--token", bot.Token, "--base-url", tg.URL)
	var ok bool
	c.hook, ok = tg.Webhook(bot)
	require.True(t, ok, "the channel registered its webhook")
	return &fanout{conversation: c, env: env, tok: c.s.demo.Token, api: "/api/bots/" + c.s.demo.BotID, chats: map[string]int64{}}
}

// crash kills the process (-9: nothing flushed, no step finished) and starts another on the
// same data, address and environment.
func (f *fanout) crash(t *testing.T) {
	t.Helper()
	f.s.kill()
	f.s = startWithEnv(t, f.dir, f.env, f.args...)
	f.s.secret(f.bot.Token)
}

// subscribe creates n Telegram subscribers, chats first, first+1, ...; extra is merged into
// each creation body.
func (f *fanout) subscribe(t *testing.T, first int64, n int, extra map[string]any) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range int64(n) {
		body := map[string]any{"channel": "telegram", "external_id": strconv.FormatInt(first+i, 10)}
		for k, v := range extra {
			body[k] = v
		}
		r := f.s.post(f.tok, f.api+"/subscribers", body)
		require.Less(t, r.Status, 300, "%s", r.Body)
		id := r.JSON(t)["id"].(string)
		f.chats[id] = first + i
		ids = append(ids, id)
	}
	return ids
}

// draft creates a broadcast to every subscriber over Telegram, with a published message
// document of its own; it returns the broadcast's path.
func (f *fanout) draft(t *testing.T, name string) string {
	t.Helper()
	r := f.s.post(f.tok, f.api+"/content", map[string]any{"type": "message", "name": name, "draft": map[string]any{"text": name + " for {{ subscriber.id }}"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)
	r = f.s.post(f.tok, f.api+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = f.s.post(f.tok, f.api+"/broadcasts", map[string]any{"name": name, "channels": []string{"telegram"}, "content": map[string]any{"document_id": doc}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	return f.api + "/broadcasts/" + r.JSON(t)["id"].(string)
}

// launch drafts a broadcast and schedules it now.
func (f *fanout) launch(t *testing.T, name string) string {
	t.Helper()
	one := f.draft(t, name)
	r := f.s.post(f.tok, one+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	return one
}

// broadcast reads the broadcast.
func (f *fanout) broadcast(t *testing.T, one string) map[string]any {
	t.Helper()
	r := f.s.get(f.tok, one)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	return r.JSON(t)
}

// completes waits for the broadcast to complete.
func (f *fanout) completes(t *testing.T, one string, within time.Duration) {
	t.Helper()
	eventually(t, within, "the broadcast completes", func() bool {
		st := f.broadcast(t, one)["status"]
		require.NotContains(t, []any{"failed", "canceled", "paused"}, st, "the broadcast stopped")
		return st == "completed"
	})
}

// fanoutRecipient is a row of GET .../recipients.
type fanoutRecipient struct {
	ID           string `json:"id"`
	SubscriberID string `json:"subscriber_id"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
	MessageID    string `json:"message_id"`
}

// recipients reads every row of the broadcast, page by page.
func (f *fanout) recipients(t *testing.T, one string) []fanoutRecipient {
	t.Helper()
	var all []fanoutRecipient
	cursor := ""
	for {
		path := one + "/recipients?limit=200"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := f.s.get(f.tok, path)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		var page struct {
			Data       []fanoutRecipient `json:"data"`
			NextCursor *string           `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &page))
		all = append(all, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all
		}
		cursor = *page.NextCursor
	}
}

// inState counts the rows in state.
func inState(rows []fanoutRecipient, state string) int {
	n := 0
	for _, r := range rows {
		if r.State == state {
			n++
		}
	}
	return n
}

// fanoutReport is the Telegram channel of GET .../report.
type fanoutReport struct {
	Planned     int64            `json:"planned"`
	Pending     int64            `json:"pending"`
	Sent        int64            `json:"sent"`
	Interrupted int64            `json:"interrupted"`
	Canceled    int64            `json:"canceled"`
	Failed      map[string]int64 `json:"failed"`
	Skipped     map[string]int64 `json:"skipped"`
}

func (f *fanout) report(t *testing.T, one string) fanoutReport {
	t.Helper()
	r := f.s.get(f.tok, one+"/report")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	var rep struct {
		Channels []struct {
			Channel string `json:"channel"`
			fanoutReport
		} `json:"channels"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	for _, c := range rep.Channels {
		if c.Channel == "telegram" {
			return c.fanoutReport
		}
	}
	t.Fatalf("no telegram channel in the report: %s", r.Body)
	return fanoutReport{}
}

// received counts the messages the fake accepted, per chat.
func (f *fanout) received() map[int64]int {
	got := map[int64]int{}
	for _, m := range f.tg.AllSent() {
		got[m.ChatID]++
	}
	return got
}

// answered counts the fake's answers to sendMessage with status.
func (f *fanout) answered(status int) int {
	n := 0
	for _, c := range f.tg.Calls() {
		if c.Method == "sendMessage" && c.Status == status {
			n++
		}
	}
	return n
}

// exactlyOnce asserts that the broadcast's rows are all sent and that each chat of the
// test's subscribers got exactly one message, no more, none missing.
func (f *fanout) exactlyOnce(t *testing.T, one string) {
	t.Helper()
	rows := f.recipients(t, one)
	assert.Len(t, rows, len(f.chats), "one row per subscriber")
	assert.Equal(t, len(f.chats), inState(rows, "sent"), "every row is sent")
	got := f.received()
	for id, chat := range f.chats {
		assert.Equal(t, 1, got[chat], "subscriber %s (chat %d) got the broadcast %d times", id, chat, got[chat])
	}
	assert.Len(t, f.tg.AllSent(), len(f.chats), "the fake accepted one message per subscriber, nothing else")
	rep := f.report(t, one)
	assert.EqualValues(t, len(f.chats), rep.Planned)
	assert.EqualValues(t, len(f.chats), rep.Sent, "the report agrees with the fake")
	assert.Zero(t, rep.Pending)
	assert.Zero(t, rep.Interrupted)
	assert.Empty(t, rep.Failed)
}

// A process killed (-9) while a broadcast sends, restarted on the same data: the send goes on
// in the new process; nobody gets the broadcast twice; a recipient without it is exactly a
// row counted interrupted (claimed by the dead process, fate unknown, never resent: at 5/s a
// batch is one row, so at most one); the broadcast completes and the report agrees with what
// the provider accepted.
func TestBroadcastKillMidSendRestart(t *testing.T) {
	t.Parallel()
	// A short claim grace: the dead process's claim is settled interrupted seconds after the
	// restart rather than the default 10 minutes.
	f := startFanout(t, "BROADCAST_RATE_TELEGRAM=5", "BROADCAST_CLAIM_GRACE=3s")
	const n = 60
	f.subscribe(t, 20000, n, nil)
	one := f.launch(t, "Crash")

	eventually(t, 60*time.Second, "some messages are out", func() bool { return len(f.tg.AllSent()) >= 10 })
	f.crash(t)
	atKill := len(f.tg.AllSent())
	require.Less(t, atKill, n, "killed mid-send (raise n if the machine got faster)")

	f.completes(t, one, 120*time.Second)
	assert.Greater(t, len(f.tg.AllSent()), atKill, "the restarted process went on sending")

	got := f.received()
	for chat, k := range got {
		assert.Equal(t, 1, k, "chat %d got the broadcast %d times", chat, k)
	}
	rows := f.recipients(t, one)
	require.Len(t, rows, n, "one row per subscriber")
	lost, interrupted := 0, 0
	for _, r := range rows {
		chat := f.chats[r.SubscriberID]
		switch r.State {
		case "sent":
			assert.Equal(t, 1, got[chat], "row %s is sent: chat %d has it once", r.ID, chat)
		case "interrupted":
			interrupted++
			if got[chat] == 0 {
				lost++
			}
		default:
			t.Errorf("row %s of chat %d is %s (%s)", r.ID, chat, r.State, r.Reason)
		}
	}
	t.Logf("killed after %d of %d; %d interrupted, of which %d never reached the provider", atKill, n, interrupted, lost)
	assert.LessOrEqual(t, interrupted, 1, "a crash costs at most the batch in flight")
	rep := f.report(t, one)
	assert.EqualValues(t, n, rep.Planned)
	assert.Zero(t, rep.Pending)
	assert.EqualValues(t, inState(rows, "sent"), rep.Sent, "the report's sent matches the rows")
	assert.EqualValues(t, interrupted, rep.Interrupted)
	assert.EqualValues(t, n, rep.Sent+rep.Interrupted)
	assert.Equal(t, int(rep.Sent)+interrupted-lost, len(f.tg.AllSent()), "the provider saw every sent row and nothing else")
}

// A broadcast paused mid-send, the process killed (-9) with nothing in flight and started
// again on the same data: nothing goes out while paused, across the restart; resume goes on
// where the pause stopped, and every recipient gets the broadcast exactly once, none twice,
// none missing, nothing counted interrupted.
func TestBroadcastPauseKillResume(t *testing.T) {
	t.Parallel()
	f := startFanout(t, "BROADCAST_RATE_TELEGRAM=5")
	const n = 60
	f.subscribe(t, 21000, n, nil)
	one := f.launch(t, "Quiet")
	eventually(t, 60*time.Second, "some messages are out", func() bool { return len(f.tg.AllSent()) >= 10 })
	atPause := f.pause(t, one)
	require.Less(t, atPause, n, "paused mid-send")

	f.crash(t)
	b := f.broadcast(t, one)
	require.Equal(t, "paused", b["status"], "the pause survives the crash")
	rows := f.recipients(t, one)
	assert.Zero(t, inState(rows, "sending"), "nothing was claimed when the process died")
	assert.Equal(t, atPause, inState(rows, "sent"))
	r := f.s.post(f.tok, one+"/resume", map[string]any{"expected_revision": b["revision"]})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	f.completes(t, one, 120*time.Second)
	f.exactlyOnce(t, one)
}

// pause pauses a running broadcast (again while the send moves its revision), waits for the
// send to stop and checks that it stays stopped; it returns how many messages went out.
func (f *fanout) pause(t *testing.T, one string) int {
	t.Helper()
	var r resp
	var atAck int
	for {
		b := f.broadcast(t, one)
		require.Equal(t, "running", b["status"], "the broadcast finished before it could be paused: raise n")
		r = f.s.post(f.tok, one+"/pause", map[string]any{"expected_revision": b["revision"]})
		atAck = len(f.tg.AllSent())
		if r.Status == 200 {
			break
		}
		require.Equal(t, 409, r.Status, "%s", r.Body) // the send moved the revision: read again
	}
	conforms(t, http.MethodPost, "/api/bots/{botID}/broadcasts/{broadcastID}/pause", one+"/pause", r)
	assert.Equal(t, "paused", r.JSON(t)["status"], "the answer is the whole broadcast, paused")
	assert.Equal(t, one[len(f.api+"/broadcasts/"):], r.JSON(t)["id"])

	// The step in flight settles its batch and stops: no row is left sending, and what the
	// report counts sent is what the provider accepted.
	var atPause int
	eventually(t, 30*time.Second, "the send stops", func() bool {
		atPause = len(f.tg.AllSent())
		return inState(f.recipients(t, one), "sending") == 0 && f.report(t, one).Sent == int64(atPause)
	})
	assert.LessOrEqual(t, atPause-atAck, 1, "after the pause's answer at most the message in flight went out")
	// Nothing announces that nothing happens: watch for longer than several messages take at
	// 5/s.
	time.Sleep(1500 * time.Millisecond)
	assert.Len(t, f.tg.AllSent(), atPause, "nothing is sent while paused")
	assert.Zero(t, inState(f.recipients(t, one), "sending"), "nothing is claimed while paused")
	assert.Equal(t, "paused", f.broadcast(t, one)["status"])
	return atPause
}

// Pause stops the send (at most the message in flight when it was acknowledged goes out
// after), nothing goes out while paused, and resume continues where it stopped: everyone gets
// the broadcast exactly once. The shared pause route wants the second generation's
// expected_revision: 400 without it, 409 with a stale one.
func TestBroadcastPauseResumeContinues(t *testing.T) {
	t.Parallel()
	f := startFanout(t, "BROADCAST_RATE_TELEGRAM=5")
	const n = 60
	f.subscribe(t, 22000, n, nil)
	one := f.launch(t, "Pause")
	eventually(t, 60*time.Second, "some messages are out", func() bool { return len(f.tg.AllSent()) >= 5 })

	r := f.s.post(f.tok, one+"/pause", map[string]any{})
	assert.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Equal(t, "validation_failed", r.Code(t))
	assert.Contains(t, string(r.Body), "expected_revision")
	r = f.s.post(f.tok, one+"/pause", nil)
	assert.Equal(t, 400, r.Status, "no body: %s", r.Body)

	b := f.broadcast(t, one)
	require.Equal(t, "running", b["status"])
	rev := int64(b["revision"].(float64))
	r = f.s.post(f.tok, one+"/pause", map[string]any{"expected_revision": rev - 1})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "stale_revision", r.Code(t))
	assert.Equal(t, "running", f.broadcast(t, one)["status"], "a refused pause changes nothing")

	atPause := f.pause(t, one)
	require.Less(t, atPause, n, "paused mid-send")
	rep := f.report(t, one)
	assert.EqualValues(t, n-atPause, rep.Pending, "the rest waits, planned")
	assert.Equal(t, "paused", f.broadcast(t, one)["status"])

	b = f.broadcast(t, one)
	r = f.s.post(f.tok, one+"/resume", map[string]any{"expected_revision": b["revision"]})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Contains(t, []any{"running", "scheduled"}, r.JSON(t)["status"])
	f.completes(t, one, 120*time.Second)
	f.exactlyOnce(t, one)
}

// A provider answering 429 with Retry-After holds the channel (fewer attempts than the pace
// would make), and once it lets messages through again everybody gets the broadcast exactly
// once: the refused sends went back to planned, none failed, none counted interrupted.
func TestBroadcastProviderRateLimitSlowsWithoutLoss(t *testing.T) {
	t.Parallel()
	const rate = 20
	f := startFanout(t, "BROADCAST_RATE_TELEGRAM="+strconv.Itoa(rate))
	const n = 60
	f.subscribe(t, 23000, n, nil)
	one := f.launch(t, "Limited")
	eventually(t, 60*time.Second, "some messages are out", func() bool { return len(f.tg.AllSent()) >= 5 })

	f.tg.RateLimit(1)
	on := time.Now()
	eventually(t, 60*time.Second, "the provider refused sends several times", func() bool { return f.answered(http.StatusTooManyRequests) >= 4 })
	limitedFor := time.Since(on)
	f.tg.RateLimit(0)
	refused := f.answered(http.StatusTooManyRequests)
	// Without the hold the channel would have tried rate messages a second; with it, one
	// batch (a quarter second's worth) at most per Retry-After.
	batch := rate / 4
	assert.LessOrEqual(t, refused, batch*(int(limitedFor.Seconds())+2), "%d refusals in %s: the channel held for Retry-After", refused, limitedFor)

	f.completes(t, one, 120*time.Second)
	f.exactlyOnce(t, one)
	assert.GreaterOrEqual(t, f.answered(http.StatusTooManyRequests), 4, "the fake answered 429s")
}

// A Retry-After longer than a step of the send job (5 s) still holds the channel: no step
// sends again before it is over.
func TestBroadcastRetryAfterOutlastsStep(t *testing.T) {
	t.Parallel()
	f := startFanout(t, "BROADCAST_RATE_TELEGRAM=20")
	const n = 40
	f.subscribe(t, 24000, n, nil)
	one := f.launch(t, "LongHold")
	eventually(t, 60*time.Second, "some messages are out", func() bool { return len(f.tg.AllSent()) >= 5 })

	const retryAfter = 15
	f.tg.RateLimit(retryAfter)
	eventually(t, 30*time.Second, "the provider refused a send", func() bool { return f.answered(http.StatusTooManyRequests) > 0 })
	first := time.Now()
	eventually(t, 30*time.Second, "the refused batch settles", func() bool { return inState(f.recipients(t, one), "sending") == 0 })
	burst := f.answered(http.StatusTooManyRequests)
	// Watch for most of the Retry-After (well over a step): nothing may be attempted.
	time.Sleep(time.Until(first.Add((retryAfter - 3) * time.Second)))
	assert.Equal(t, burst, f.answered(http.StatusTooManyRequests), "no send before Retry-After is over")
	f.tg.RateLimit(0)
	f.completes(t, one, 120*time.Second)
	f.exactlyOnce(t, one)
}

// test-send: refused for a subscriber without the tester label (not counted against the
// limit), sent to a tester; the 11th within a minute is 429 rate_limited with an integer
// Retry-After.
func TestBroadcastTestSendLimit(t *testing.T) {
	t.Parallel()
	f := startFanout(t)
	r := f.s.post(f.tok, f.api+"/labels", map[string]any{"name": "tester"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	label := r.JSON(t)["id"].(string)
	tester := f.subscribe(t, 25000, 1, map[string]any{"labels": []string{label}})[0]
	plain := f.subscribe(t, 25001, 1, nil)[0]
	one := f.draft(t, "Trial")
	path := one + "/test-send"

	r = f.s.post(f.tok, path, map[string]any{"subscriber_id": plain})
	assert.Equal(t, 422, r.Status, "%s", r.Body)
	assert.Equal(t, "not_a_test_recipient", r.Code(t))
	assert.Empty(t, f.tg.Sent(25001), "nothing went to the subscriber without the label")

	// The limit counts in fixed minute windows: the calls are strict about the 11th only
	// when they all fall in one (nearly always).
	began := time.Now()
	var limited resp
	ok := 0
	for range 21 {
		r = f.s.post(f.tok, path, map[string]any{"subscriber_id": tester})
		if r.Status == 429 {
			limited = r
			break
		}
		require.Equal(t, 200, r.Status, "test send %d: %s", ok+1, r.Body)
		ok++
	}
	require.Equal(t, 429, limited.Status, "the test sends were limited")
	assert.Equal(t, "rate_limited", limited.Code(t))
	secs, err := strconv.Atoi(limited.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q is whole seconds", limited.Header.Get("Retry-After"))
	assert.Positive(t, secs)
	assert.LessOrEqual(t, secs, 60)
	conforms(t, http.MethodPost, "/api/bots/{botID}/broadcasts/{broadcastID}/test-send", path, limited)
	if began.Truncate(time.Minute).Equal(time.Now().Truncate(time.Minute)) {
		assert.Equal(t, 10, ok, "10 test sends a minute, the 11th refused")
	} else {
		assert.GreaterOrEqual(t, ok, 10)
	}
	assert.Len(t, f.tg.Sent(25000), ok, "each accepted test send reached the tester")
	rep := f.report(t, one)
	assert.Zero(t, rep.Sent, "test sends are not counted")
}

// A subscriber who blocked the bot: the provider's 403 fails the row with reason blocked after
// one attempt, never retried, and marks the subscriber, whom the next broadcast skips without
// trying.
func TestBroadcastBlockedSubscriberMarked(t *testing.T) {
	t.Parallel()
	f := startFanout(t)
	ids := f.subscribe(t, 26000, 5, nil)
	blocked := ids[2]
	f.tg.Block(26002)

	one := f.launch(t, "First")
	f.completes(t, one, 60*time.Second)
	rows := f.recipients(t, one)
	require.Len(t, rows, 5)
	for _, r := range rows {
		if r.SubscriberID == blocked {
			assert.Equal(t, "failed", r.State)
			assert.Equal(t, "blocked", r.Reason)
			assert.Empty(t, r.MessageID)
		} else {
			assert.Equal(t, "sent", r.State, "row %s", r.ID)
		}
	}
	rep := f.report(t, one)
	assert.EqualValues(t, 4, rep.Sent)
	assert.Equal(t, map[string]int64{"blocked": 1}, rep.Failed)
	assert.Equal(t, 1, f.answered(http.StatusForbidden), "one attempt for the blocked chat")
	assert.Empty(t, f.tg.Sent(26002))

	two := f.launch(t, "Second")
	f.completes(t, two, 60*time.Second)
	for _, r := range f.recipients(t, two) {
		if r.SubscriberID == blocked {
			assert.Equal(t, "skipped", r.State)
			assert.Equal(t, "blocked", r.Reason)
		}
	}
	assert.Equal(t, map[string]int64{"blocked": 1}, f.report(t, two).Skipped)
	assert.Equal(t, 1, f.answered(http.StatusForbidden), "the marked subscriber was not tried again")
	for i, id := range ids {
		if id != blocked {
			assert.Len(t, f.tg.Sent(int64(26000+i)), 2, "chat %d got both broadcasts", 26000+i)
		}
	}
}
