package platform

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue/sqs"
)

// Sweeper relays what the outbox could not deliver after its commit (*outbox.Outbox).
type Sweeper interface {
	Sweep(ctx context.Context) (outbox.Result, error)
}

// JobsHandler is the jobs Lambda's handler. The function has three callers: the SQS event
// source (a batch of queued job steps, answered with the records that failed), the Step
// Functions state machine (one State in, the State after one step out) and the schedule
// that sweeps the outbox every minute (OutboxSweepEvent in, the sweep's outbox.Result out;
// an error when items stay undelivered, which the Lambda's error alarm reports).
func JobsHandler(consumer *sqs.Consumer, reg *jobs.Registry, sweeper Sweeper) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Records []json.RawMessage `json:"Records"`
			Outbox  *string           `json:"outbox"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("jobs: unreadable event: %w", err)
		}
		if probe.Outbox != nil {
			var ev struct {
				Outbox string `json:"outbox"`
			}
			if err := strictUnmarshal(raw, &ev); err != nil || ev.Outbox != "sweep" {
				return nil, fmt.Errorf("jobs: unknown outbox event; the schedule sends %s", OutboxSweepEvent)
			}
			return sweeper.Sweep(ctx)
		}
		if probe.Records != nil {
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("jobs: unreadable SQS event: %w", err)
			}
			return consumer.Handle(ctx, ev)
		}
		var st jobs.State
		if err := strictUnmarshal(raw, &st); err != nil {
			return nil, fmt.Errorf("jobs: unreadable job state: %w", err)
		}
		if st.Kind == "" {
			return nil, errors.New("jobs: the job state has no kind")
		}
		return reg.RunStep(ctx, st)
	}
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// JobsLambda builds the jobs Lambda's handler from the environment contract: the store, the
// jobs queue (continuations are sent to it, and the outbox relays to it), and the job kinds,
// queue handlers and bot purge steps of all (every family: functions/families).
func JobsLambda(ctx context.Context, log *slog.Logger, now func() time.Time, all []family.Family) (func(context.Context, json.RawMessage) (any, error), error) {
	a, st, err := loadStore(ctx, log)
	if err != nil {
		return nil, err
	}
	// The conversation runtime runs here: it opens channel credentials (SECRETS_KEY_ID) and
	// sends through the providers' adapters. So do the CRM family's steps: they open CRM
	// credentials (the CRM sealer, under its own encryption context) and refresh OAuth
	// tokens with the applications' client secrets, read from SSM at cold start where the
	// environment names their parameters, as in the crm Lambda.
	deps, err := a.deps(ctx, st, log, now)
	if err != nil {
		return nil, err
	}
	if deps.Queue == nil {
		return nil, errors.New("platform: the jobs Lambda needs JOBS_QUEUE_URL")
	}
	// Jobs answer no HTTP, so audit events are not theirs to publish, and serve no list, so
	// the cursor key is a throwaway the environment requires.
	deps.Audit = noAudit{}
	deps.CursorKey = make([]byte, 32)
	if _, err := rand.Read(deps.CursorKey); err != nil {
		return nil, err
	}
	// Campaign sends sign their tracking and unsubscribe tokens with the link key the
	// public routes check them with.
	if a.cfg.CursorKeyID != "" {
		if deps.LinkKey, err = a.LinkKey(ctx); err != nil {
			return nil, err
		}
	}
	env, err := family.NewEnv(deps)
	if err != nil {
		return nil, err
	}
	composed := family.Compose(env, all...)
	handlers, err := composed.QueueMux()
	if err != nil {
		return nil, err
	}
	consumer, err := sqs.NewConsumer(sqs.ConsumerConfig{Handler: handlers, Client: a.SQS(), Log: log})
	if err != nil {
		return nil, err
	}
	return JobsHandler(consumer, composed.Registry(), env.Outbox), nil
}
