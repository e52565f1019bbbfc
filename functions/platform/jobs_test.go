package platform

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/sqs"
)

func readSample(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "samples", name))
	require.NoError(t, err)
	return b
}

// The jobs Lambda tells its two callers apart: SQS batches get a partial batch response,
// Step Functions states get the state after one step.
func TestJobsHandler(t *testing.T) {
	t.Parallel()
	qmux := queue.NewMux()
	qmux.HandleFunc("test.job", func(_ context.Context, m queue.Message) error {
		var b struct{ N int }
		if err := m.Decode(&b); err != nil {
			return err
		}
		if b.N == 2 {
			return errors.New("n=2 always fails")
		}
		return nil
	})
	consumer, err := sqs.NewConsumer(sqs.ConsumerConfig{Handler: qmux})
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	reg.Register("count", func(_ context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
		var p struct{ To int }
		if err := json.Unmarshal(payload, &p); err != nil {
			return "", false, err
		}
		n, _ := strconv.Atoi(cursor)
		return strconv.Itoa(n + 1), n+1 >= p.To, nil
	})
	sweeps := &sweeps{res: outbox.Result{Delivered: 3}}
	h := JobsHandler(consumer, reg, sweeps)

	out, err := h(context.Background(), readSample(t, "sqs-work-messages.json"))
	require.NoError(t, err)
	res, ok := out.(events.SQSEventResponse)
	require.True(t, ok, "%T", out)
	require.Len(t, res.BatchItemFailures, 1)
	assert.Equal(t, "2e1424d4-f796-459a-8184-9c92662be6da", res.BatchItemFailures[0].ItemIdentifier)

	state := json.RawMessage(`{"kind":"count","payload":{"to":2},"cursor":"","done":false,"steps":0}`)
	for i := 0; ; i++ {
		require.Less(t, i, 5)
		out, err := h(context.Background(), state)
		require.NoError(t, err)
		st := out.(jobs.State)
		if st.Done {
			assert.Equal(t, 2, st.Steps)
			break
		}
		state, err = json.Marshal(st)
		require.NoError(t, err)
	}

	out, err = h(context.Background(), readSample(t, "scheduler-outbox-sweep.json"))
	require.NoError(t, err)
	assert.Equal(t, outbox.Result{Delivered: 3}, out, "the schedule's sweep")
	assert.Equal(t, 1, sweeps.n)
	sweeps.err = errors.New("2 item(s) not delivered")
	_, err = h(context.Background(), json.RawMessage(OutboxSweepEvent))
	assert.ErrorContains(t, err, "not delivered", "a sweep that leaves items is a failed invocation (alarmed)")

	for name, raw := range map[string]string{
		"another outbox event": `{"outbox":"drain"}`,
		"outbox and more":      `{"outbox":"sweep","kind":"count"}`,
		"not JSON":             `nope`,
		"unknown field":        `{"kind":"count","payload":{},"colour":"red"}`,
		"no kind":              `{"payload":{}}`,
		"unknown kind":         `{"kind":"nope","payload":{}}`,
		"failing sample":       string(readSample(t, "sfn-job-step.json")),
	} {
		_, err := h(context.Background(), json.RawMessage(raw))
		assert.Error(t, err, name)
	}
	assert.Equal(t, 2, sweeps.n, "no other event sweeps")
}

// sweeps counts the sweeps it is asked for.
type sweeps struct {
	n   int
	res outbox.Result
	err error
}

func (s *sweeps) Sweep(context.Context) (outbox.Result, error) {
	s.n++
	return s.res, s.err
}

// The schedule's payload is the sample the tests use, byte for byte but the newline.
func TestOutboxSweepEventSample(t *testing.T) {
	t.Parallel()
	assert.JSONEq(t, OutboxSweepEvent, string(readSample(t, "scheduler-outbox-sweep.json")))
}
