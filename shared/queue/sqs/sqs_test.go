package sqs_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/batch"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/sqs"
)

const queueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/botplatform-jobs"

// batchRequest is SendMessageBatch's request as SQS's JSON protocol defines it; decoding it
// strictly catches a field the SDK would send that the service does not know.
type batchRequest struct {
	QueueUrl string
	Entries  []struct {
		Id                string
		MessageBody       string
		DelaySeconds      int32 `json:",omitempty"`
		MessageAttributes map[string]struct {
			DataType    string
			StringValue string
		}
	}
}

// fakeSQS answers SendMessageBatch like SQS, checking the batch limits the service checks
// and failing the entries fail picks.
type fakeSQS struct {
	*awsfake.Server
	t *testing.T
	// fail decides an entry's fate: "" accepts it, otherwise the error code; the code
	// "InvalidParameterValue" is reported as the sender's fault.
	fail func(body string, seen int) string

	mu       sync.Mutex
	seen     map[string]int // times each body was received
	accepted []string       // bodies accepted, in order
}

func newFakeSQS(t *testing.T, fail func(body string, seen int) string) *fakeSQS {
	f := &fakeSQS{Server: awsfake.New(t, awsfake.SQS), t: t, fail: fail, seen: map[string]int{}}
	f.Handle("SendMessageBatch", f.sendMessageBatch)
	return f
}

func (f *fakeSQS) sendMessageBatch(raw json.RawMessage) (any, *awsfake.Error) {
	var req batchRequest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		f.t.Errorf("SendMessageBatch body: %v", err)
		return nil, &awsfake.Error{Status: 400, Type: "InvalidParameterValue", Message: err.Error()}
	}
	assert.Equal(f.t, queueURL, req.QueueUrl)
	if n := len(req.Entries); n == 0 || n > 10 {
		f.t.Errorf("batch of %d entries", n)
		return nil, &awsfake.Error{Status: 400, Type: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", Message: "too many entries"}
	}
	total := 0
	ids := map[string]bool{}
	for _, e := range req.Entries {
		total += len(e.MessageBody)
		for name, a := range e.MessageAttributes {
			total += len(name) + len(a.DataType) + len(a.StringValue)
		}
		if ids[e.Id] {
			f.t.Errorf("duplicate entry id %s", e.Id)
		}
		ids[e.Id] = true
	}
	if total > 256*1024 {
		f.t.Errorf("batch of %d bytes", total)
		return nil, &awsfake.Error{Status: 400, Type: "AWS.SimpleQueueService.BatchRequestTooLong", Message: "too long"}
	}

	type ok struct{ Id, MessageId, MD5OfMessageBody string }
	type failed struct {
		Id, Code, Message string
		SenderFault       bool
	}
	resp := struct {
		Successful []ok
		Failed     []failed
	}{Successful: []ok{}, Failed: []failed{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range req.Entries {
		f.seen[e.MessageBody]++
		a := e.MessageAttributes["type"]
		assert.Equal(f.t, "String", a.DataType)
		assert.Equal(f.t, "test.job", a.StringValue)
		if code := f.fail(e.MessageBody, f.seen[e.MessageBody]); code != "" {
			resp.Failed = append(resp.Failed, failed{Id: e.Id, Code: code, Message: "fake failure", SenderFault: code == "InvalidParameterValue"})
			continue
		}
		f.accepted = append(f.accepted, e.MessageBody)
		// The SDK verifies this checksum of every accepted body, as the real service's.
		sum := md5.Sum([]byte(e.MessageBody))
		resp.Successful = append(resp.Successful, ok{Id: e.Id, MessageId: "m-" + e.Id, MD5OfMessageBody: hex.EncodeToString(sum[:])})
	}
	return resp, nil
}

// batches returns the bodies of every SendMessageBatch call, per call.
func (f *fakeSQS) batches(t *testing.T) [][]string {
	var out [][]string
	for _, raw := range f.Calls("SendMessageBatch") {
		var req batchRequest
		require.NoError(t, json.Unmarshal(raw, &req))
		var bodies []string
		for _, e := range req.Entries {
			bodies = append(bodies, e.MessageBody)
		}
		out = append(out, bodies)
	}
	return out
}

func newSender(t *testing.T, f *fakeSQS, attempts int) *sqs.Sender {
	t.Helper()
	client := awssqs.NewFromConfig(f.Config())
	s, err := sqs.NewSender(client, sqs.SenderConfig{
		QueueURL: queueURL, MaxAttempts: attempts, Backoff: backoff.Policy{Base: time.Millisecond, Max: 4 * time.Millisecond},
	})
	require.NoError(t, err)
	return s
}

func jobs(t *testing.T, bodies ...string) []queue.Message {
	out := make([]queue.Message, len(bodies))
	for i, b := range bodies {
		out[i] = queue.Message{Type: "test.job", Body: json.RawMessage(b)}
	}
	return out
}

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	return out
}

func TestSendBatchesOfTenAndRetriesOnlyFailedEntries(t *testing.T) {
	t.Parallel()
	bodies := numbered(25)
	flaky := map[string]bool{bodies[3]: true, bodies[11]: true, bodies[12]: true, bodies[24]: true}
	f := newFakeSQS(t, func(body string, seen int) string {
		if flaky[body] && seen == 1 {
			return "InternalError"
		}
		return ""
	})
	require.NoError(t, newSender(t, f, 3).Send(context.Background(), jobs(t, bodies...)...))

	got := f.batches(t)
	require.Len(t, got, 6, "3 batches, then one retry per batch that had a failure")
	assert.Equal(t, bodies[0:10], got[0])
	assert.Equal(t, []string{bodies[3]}, got[1], "the retry carries only the failed entry")
	assert.Equal(t, bodies[10:20], got[2])
	assert.Equal(t, []string{bodies[11], bodies[12]}, got[3])
	assert.Equal(t, bodies[20:25], got[4])
	assert.Equal(t, []string{bodies[24]}, got[5])
	assert.ElementsMatch(t, bodies, f.accepted, "every message accepted exactly once")
}

func TestSendSplitsBatchesBySize(t *testing.T) {
	t.Parallel()
	f := newFakeSQS(t, func(string, int) string { return "" })
	big := `"` + strings.Repeat("x", 100*1024) + `"`
	bodies := []string{big, big, big, `1`}
	require.NoError(t, newSender(t, f, 1).Send(context.Background(), jobs(t, bodies...)...))
	got := f.batches(t)
	require.Len(t, got, 2, "three 100 KiB messages do not fit one 256 KiB batch")
	assert.Len(t, got[0], 2)
	assert.Len(t, got[1], 2)
}

func TestSendReportsWhatStillFailed(t *testing.T) {
	t.Parallel()
	bodies := numbered(4)
	f := newFakeSQS(t, func(body string, seen int) string {
		switch body {
		case bodies[1]:
			return "InternalError" // never recovers
		case bodies[2]:
			return "InvalidParameterValue" // the sender's fault: retrying cannot help
		}
		return ""
	})
	err := newSender(t, f, 3).Send(context.Background(), jobs(t, bodies...)...)
	var serr *batch.Error
	require.ErrorAs(t, err, &serr)
	require.Len(t, serr.Failures, 2)
	assert.Equal(t, batch.Failure{Index: 1, Code: "InternalError", Message: "fake failure"}, serr.Failures[0])
	assert.Equal(t, batch.Failure{Index: 2, Code: "InvalidParameterValue", Message: "fake failure", SenderFault: true}, serr.Failures[1])
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, 3, f.seen[bodies[1]], "retried up to MaxAttempts")
	assert.Equal(t, 1, f.seen[bodies[2]], "a sender fault is not retried")
	assert.ElementsMatch(t, []string{bodies[0], bodies[3]}, f.accepted)
}

func TestSendCallFailureAndDelay(t *testing.T) {
	t.Parallel()
	f := awsfake.New(t, awsfake.SQS)
	f.Handle("SendMessageBatch", func(json.RawMessage) (any, *awsfake.Error) {
		return nil, &awsfake.Error{Status: 400, Type: "AWS.SimpleQueueService.NonExistentQueue", Message: "no such queue"}
	})
	s, err := sqs.NewSender(awssqs.NewFromConfig(f.Config()), sqs.SenderConfig{QueueURL: queueURL})
	require.NoError(t, err)
	m := jobs(t, `1`)[0]
	m.Delay = 1500 * time.Millisecond
	err = s.Send(context.Background(), m)
	var serr *batch.Error
	require.ErrorAs(t, err, &serr)
	assert.Equal(t, []int{0}, []int{serr.Failures[0].Index})
	assert.ErrorContains(t, err, "NonExistentQueue")
	calls := f.Calls("SendMessageBatch")
	require.Len(t, calls, 1, "a refused call is not retried by us")
	assert.Contains(t, string(calls[0]), `"DelaySeconds":2`, "delays round up to whole seconds")

	_, err = sqs.NewSender(nil, sqs.SenderConfig{})
	assert.ErrorContains(t, err, "client")
	assert.ErrorContains(t, err, "queue URL")
}

func sampleEvent(t *testing.T) events.SQSEvent {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "../../../events/samples/sqs-work-messages.json"))
	require.NoError(t, err)
	var ev events.SQSEvent
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&ev))
	return ev
}

func TestConsumerReportsOnlyFailedRecords(t *testing.T) {
	t.Parallel()
	f := awsfake.New(t, awsfake.SQS)
	f.Handle("ChangeMessageVisibility", func(json.RawMessage) (any, *awsfake.Error) { return struct{}{}, nil })
	ev := sampleEvent(t)
	var mu sync.Mutex
	var handled []queue.Message
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{
		Client:       awssqs.NewFromConfig(f.Config()),
		Concurrency:  3,
		RetryBackoff: &backoff.Policy{Base: 10 * time.Second, Max: 10 * time.Minute},
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			mu.Lock()
			handled = append(handled, m)
			mu.Unlock()
			var b struct{ N int }
			if err := m.Decode(&b); err != nil {
				return err
			}
			if b.N == 2 {
				return errors.New("record 2 fails")
			}
			return nil
		}),
	})
	require.NoError(t, err)

	resp, err := c.Handle(context.Background(), ev)
	require.NoError(t, err, "a partial failure is not a batch failure")
	assert.Equal(t, []events.SQSBatchItemFailure{{ItemIdentifier: ev.Records[1].MessageId}}, resp.BatchItemFailures)
	assert.Len(t, handled, 3)
	for _, m := range handled {
		assert.Equal(t, "test.job", m.Type)
		if m.ID == ev.Records[1].MessageId {
			assert.Equal(t, 3, m.Attempt)
		}
	}
	// The failed record's retry is scheduled after the backoff of its third receive
	// (10 s doubled twice, equal jitter: 20..40 s) rather than the queue's timeout.
	calls := f.Calls("ChangeMessageVisibility")
	require.Len(t, calls, 1)
	var cv struct {
		QueueUrl, ReceiptHandle string
		VisibilityTimeout       int
	}
	require.NoError(t, json.Unmarshal(calls[0], &cv))
	assert.Equal(t, queueURL, cv.QueueUrl)
	assert.Equal(t, ev.Records[1].ReceiptHandle, cv.ReceiptHandle)
	assert.GreaterOrEqual(t, cv.VisibilityTimeout, 20)
	assert.LessOrEqual(t, cv.VisibilityTimeout, 40)

	b, err := json.Marshal(resp)
	require.NoError(t, err)
	assert.JSONEq(t, `{"batchItemFailures":[{"itemIdentifier":"`+ev.Records[1].MessageId+`"}]}`, string(b))
}

func TestConsumerAllSucceedAndMalformedRecords(t *testing.T) {
	t.Parallel()
	ev := sampleEvent(t)
	ev.Records[0].MessageAttributes = nil // no type
	ev.Records[1].Body = "{not json"
	var calls atomic.Int32
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
		calls.Add(1)
		if m.Attempt == 1 {
			panic("boom") // a panicking handler fails its record, not the batch
		}
		return nil
	})})
	require.NoError(t, err)
	resp, err := c.Handle(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, []events.SQSBatchItemFailure{
		{ItemIdentifier: ev.Records[0].MessageId}, {ItemIdentifier: ev.Records[1].MessageId}, {ItemIdentifier: ev.Records[2].MessageId},
	}, resp.BatchItemFailures)
	assert.EqualValues(t, 1, calls.Load(), "malformed records never reach the handler")

	ok, err := sqs.NewConsumer(sqs.ConsumerConfig{Handler: queue.HandlerFunc(func(context.Context, queue.Message) error { return nil })})
	require.NoError(t, err)
	resp, err = ok.Handle(context.Background(), sampleEvent(t))
	require.NoError(t, err)
	b, _ := json.Marshal(resp)
	assert.JSONEq(t, `{"batchItemFailures":[]}`, string(b), "an empty list, not null: every record succeeded")
}

func TestConsumerFIFOStopsAtFirstFailure(t *testing.T) {
	t.Parallel()
	ev := sampleEvent(t)
	for i := range ev.Records {
		ev.Records[i].EventSourceARN += ".fifo"
	}
	var order []string
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{Concurrency: 4, Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
		order = append(order, m.ID)
		if m.ID == ev.Records[1].MessageId {
			return errors.New("fails")
		}
		return nil
	})})
	require.NoError(t, err)
	resp, err := c.Handle(context.Background(), ev)
	require.NoError(t, err)
	assert.Equal(t, []string{ev.Records[0].MessageId, ev.Records[1].MessageId}, order, "in order, and nothing after the failure")
	assert.Equal(t, []events.SQSBatchItemFailure{{ItemIdentifier: ev.Records[1].MessageId}, {ItemIdentifier: ev.Records[2].MessageId}}, resp.BatchItemFailures)
}

func TestHandlerExtendsVisibility(t *testing.T) {
	t.Parallel()
	f := awsfake.New(t, awsfake.SQS)
	f.Handle("ChangeMessageVisibility", func(json.RawMessage) (any, *awsfake.Error) { return struct{}{}, nil })
	ev := sampleEvent(t)
	ev.Records = ev.Records[:1]
	c, err := sqs.NewConsumer(sqs.ConsumerConfig{
		Client: awssqs.NewFromConfig(f.Config()),
		Handler: queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
			if err := queue.ExtendVisibility(ctx, 90*time.Second); err != nil {
				return err
			}
			return queue.ExtendVisibility(ctx, 24*time.Hour) // capped at SQS's 12 hours
		}),
	})
	require.NoError(t, err)
	resp, err := c.Handle(context.Background(), ev)
	require.NoError(t, err)
	assert.Empty(t, resp.BatchItemFailures)
	calls := f.Calls("ChangeMessageVisibility")
	require.Len(t, calls, 2)
	assert.JSONEq(t, `{"QueueUrl":"`+queueURL+`","ReceiptHandle":"`+ev.Records[0].ReceiptHandle+`","VisibilityTimeout":90}`, string(calls[0]))
	assert.Contains(t, string(calls[1]), `"VisibilityTimeout":43200`)
}

func TestQueueURLFromARN(t *testing.T) {
	t.Parallel()
	for arn, want := range map[string]string{
		"arn:aws:sqs:us-east-1:123456789012:jobs":        "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
		"arn:aws-cn:sqs:cn-north-1:123456789012:q.fifo":  "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q.fifo",
		"arn:aws:sns:us-east-1:123456789012:topic":       "",
		"arn:aws:sqs:us-east-1:123456789012":             "",
		"arn:aws:sqs:us-east-1:123456789012:jobs:extra:": "",
	} {
		got, err := sqs.QueueURLFromARN(arn)
		if want == "" {
			assert.Error(t, err, arn)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
}

// A handler's queue.RetryAfter delay wins over a shorter backoff, and applies without one.
func TestConsumerHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	for _, backoff := range []*backoff.Policy{{Base: time.Second, Max: time.Second}, nil} {
		f := awsfake.New(t, awsfake.SQS)
		f.Handle("ChangeMessageVisibility", func(json.RawMessage) (any, *awsfake.Error) { return struct{}{}, nil })
		ev := sampleEvent(t)
		ev.Records = ev.Records[:1]
		c, err := sqs.NewConsumer(sqs.ConsumerConfig{
			Client:       awssqs.NewFromConfig(f.Config()),
			RetryBackoff: backoff,
			Handler: queue.HandlerFunc(func(context.Context, queue.Message) error {
				return queue.RetryAfter(errors.New("429"), 30*time.Second)
			}),
		})
		require.NoError(t, err)
		resp, err := c.Handle(context.Background(), ev)
		require.NoError(t, err)
		require.Len(t, resp.BatchItemFailures, 1)
		calls := f.Calls("ChangeMessageVisibility")
		require.Len(t, calls, 1)
		var cv struct{ VisibilityTimeout int }
		require.NoError(t, json.Unmarshal(calls[0], &cv))
		assert.Equal(t, 30, cv.VisibilityTimeout)
	}
}
