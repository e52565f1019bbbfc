package eventbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/audit/eventbridge"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/batch"
	"github.com/botplatform/api/shared/ids"
)

const bus = "botplatform-audit"

// putEventsRequest is PutEvents's request as the service defines it, decoded strictly.
type putEventsRequest struct {
	Entries []struct {
		Source       string
		DetailType   string
		Detail       string
		EventBusName string
		Time         float64 // epoch seconds, as the JSON protocol sends timestamps
	}
}

// fakeBus answers PutEvents like EventBridge, failing the entries fail picks.
type fakeBus struct {
	*awsfake.Server
	t    *testing.T
	fail func(eventID string, seen int) string

	mu       sync.Mutex
	seen     map[string]int
	accepted []audit.Event
}

func newFakeBus(t *testing.T, fail func(eventID string, seen int) string) *fakeBus {
	b := &fakeBus{Server: awsfake.New(t, awsfake.EventBridge), t: t, fail: fail, seen: map[string]int{}}
	b.Handle("PutEvents", b.putEvents)
	return b
}

func (b *fakeBus) putEvents(raw json.RawMessage) (any, *awsfake.Error) {
	var req putEventsRequest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		b.t.Errorf("PutEvents body: %v", err)
		return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: err.Error()}
	}
	if n := len(req.Entries); n == 0 || n > 10 {
		b.t.Errorf("PutEvents with %d entries", n)
		return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: "1 to 10 entries"}
	}
	type result struct {
		EventId      string `json:",omitempty"`
		ErrorCode    string `json:",omitempty"`
		ErrorMessage string `json:",omitempty"`
	}
	resp := struct {
		FailedEntryCount int
		Entries          []result
	}{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range req.Entries {
		assert.Equal(b.t, bus, e.EventBusName)
		assert.Equal(b.t, "botplatform.api", e.Source)
		assert.Equal(b.t, "audit.event", e.DetailType)
		ev, err := audit.DecodeEvent([]byte(e.Detail))
		if !assert.NoError(b.t, err, "detail must be exactly an audit event") {
			resp.FailedEntryCount++
			resp.Entries = append(resp.Entries, result{ErrorCode: "MalformedDetail", ErrorMessage: err.Error()})
			continue
		}
		assert.InDelta(b.t, float64(ev.Time.UnixMilli())/1000, e.Time, 0.001, "entry time is the event's")
		b.seen[ev.ID]++
		if code := b.fail(ev.ID, b.seen[ev.ID]); code != "" {
			resp.FailedEntryCount++
			resp.Entries = append(resp.Entries, result{ErrorCode: code, ErrorMessage: "fake failure"})
			continue
		}
		b.accepted = append(b.accepted, ev)
		resp.Entries = append(resp.Entries, result{EventId: "eb-" + ev.ID})
	}
	return resp, nil
}

// calls returns the event ids of each PutEvents call.
func (b *fakeBus) calls(t *testing.T) [][]string {
	var out [][]string
	for _, raw := range b.Calls("PutEvents") {
		var req putEventsRequest
		require.NoError(t, json.Unmarshal(raw, &req))
		var idsIn []string
		for _, e := range req.Entries {
			var ev audit.Event
			require.NoError(t, json.Unmarshal([]byte(e.Detail), &ev))
			idsIn = append(idsIn, ev.ID)
		}
		out = append(out, idsIn)
	}
	return out
}

func newPublisher(t *testing.T, b *fakeBus) *eventbridge.Publisher {
	t.Helper()
	p, err := eventbridge.New(awseb.NewFromConfig(b.Config()), eventbridge.Config{
		BusName: bus, MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
	})
	require.NoError(t, err)
	return p
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

func event(i int) audit.Event {
	at := t0.Add(time.Duration(i) * time.Second)
	return audit.Event{
		ID: ids.At("evt", at), Time: at, AccountID: "acct_1", ActorUserID: "usr_1", TokenID: "pat_1", TokenKind: "pat",
		BotID: "bot_1", Method: "PATCH", Route: "PATCH /api/bots/{botID}", Status: 200, RequestID: fmt.Sprintf("req_%d", i),
	}
}

func auditEvents(n int) []audit.Event {
	out := make([]audit.Event, n)
	for i := range out {
		out[i] = event(i)
	}
	return out
}

func TestPublishPutsOneEntry(t *testing.T) {
	t.Parallel()
	b := newFakeBus(t, func(string, int) string { return "" })
	e := event(1)
	require.NoError(t, newPublisher(t, b).Publish(context.Background(), e))
	require.Len(t, b.accepted, 1)
	assert.Equal(t, e, b.accepted[0], "the detail round-trips to the same event")
	assert.Equal(t, [][]string{{e.ID}}, b.calls(t))
}

func TestPublishBatchRetriesOnlyFailedEntries(t *testing.T) {
	t.Parallel()
	es := auditEvents(23)
	flaky := map[string]bool{es[2].ID: true, es[9].ID: true, es[21].ID: true}
	b := newFakeBus(t, func(id string, seen int) string {
		if flaky[id] && seen == 1 {
			return "ThrottlingException"
		}
		return ""
	})
	require.NoError(t, newPublisher(t, b).PublishBatch(context.Background(), es))

	idsOf := func(es []audit.Event) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.ID
		}
		return out
	}
	assert.Equal(t, [][]string{
		idsOf(es[0:10]), {es[2].ID, es[9].ID},
		idsOf(es[10:20]),
		idsOf(es[20:23]), {es[21].ID},
	}, b.calls(t))
	assert.ElementsMatch(t, es, b.accepted, "every event accepted exactly once")
}

func TestPublishReportsEntriesThatStillFail(t *testing.T) {
	t.Parallel()
	es := auditEvents(3)
	b := newFakeBus(t, func(id string, seen int) string {
		switch id {
		case es[0].ID:
			return "InternalFailure" // never recovers
		case es[1].ID:
			return "AccessDeniedException" // retrying cannot help
		}
		return ""
	})
	err := newPublisher(t, b).PublishBatch(context.Background(), es)
	var perr *batch.Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, []batch.Failure{
		{Index: 0, ID: es[0].ID, Code: "InternalFailure", Message: "fake failure"},
		{Index: 1, ID: es[1].ID, Code: "AccessDeniedException", Message: "fake failure"},
	}, perr.Failures)
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Equal(t, 3, b.seen[es[0].ID], "retried up to MaxAttempts")
	assert.Equal(t, 1, b.seen[es[1].ID], "a permanent failure is not retried")
	assert.Equal(t, []audit.Event{es[2]}, b.accepted)
}

func TestPublishCallFailure(t *testing.T) {
	t.Parallel()
	f := awsfake.New(t, awsfake.EventBridge)
	f.Handle("PutEvents", func(json.RawMessage) (any, *awsfake.Error) {
		return nil, &awsfake.Error{Status: 400, Type: "ResourceNotFoundException", Message: "no such bus"}
	})
	p, err := eventbridge.New(awseb.NewFromConfig(f.Config()), eventbridge.Config{BusName: bus})
	require.NoError(t, err)
	err = p.Publish(context.Background(), event(1))
	assert.ErrorContains(t, err, "ResourceNotFoundException")
	assert.Len(t, f.Calls("PutEvents"), 1)

	_, err = eventbridge.New(nil, eventbridge.Config{})
	assert.ErrorContains(t, err, "client")
	assert.ErrorContains(t, err, "bus name")
}

func TestNoCredentialLeavesInAnEvent(t *testing.T) {
	t.Parallel()
	b := newFakeBus(t, func(string, int) string { return "" })
	pat, bot := auth.NewToken(auth.KindPAT), auth.NewToken(auth.KindBot)
	e := event(1)
	e.RequestID = pat // a client can send anything as X-Request-Id
	e.BotID = bot     // or in the path
	require.NoError(t, newPublisher(t, b).Publish(context.Background(), e))
	for _, raw := range b.Calls("PutEvents") {
		assert.NotContains(t, string(raw), pat)
		assert.NotContains(t, string(raw), bot)
	}
	require.Len(t, b.accepted, 1)
	assert.Equal(t, audit.Redacted, b.accepted[0].RequestID)
	assert.Equal(t, audit.Redacted, b.accepted[0].BotID)
	assert.Equal(t, e.ID, b.accepted[0].ID, "everything else is kept")

	detail, err := json.Marshal(b.accepted[0])
	require.NoError(t, err)
	require.NoError(t, compileSchema(t).Validate(unmarshal(t, detail)), "a scrubbed event still fits the schema")
}

func TestPublishRefusesAnIncompleteEvent(t *testing.T) {
	t.Parallel()
	b := newFakeBus(t, func(string, int) string { return "" })
	e := event(1)
	e.AccountID, e.Status = "", 42
	err := newPublisher(t, b).Publish(context.Background(), e)
	assert.ErrorContains(t, err, "account_id is required")
	assert.ErrorContains(t, err, "status 42")
	assert.Empty(t, b.Calls("PutEvents"))
}
