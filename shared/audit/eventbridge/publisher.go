// Package eventbridge carries audit events over Amazon EventBridge on AWS: Publisher puts
// them on the bus (audit.Publisher for the family Lambdas), and Sink is the Lambda target of
// the bus's audit rule that stores them with audit.Log.
//
// Each event is one EventBridge entry: source "botplatform.api" (configurable), detail-type
// "audit.event", detail the audit.Event's JSON (events/audit-event.schema.json).
package eventbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/batch"
)

// The entry fields the audit rule matches on.
const (
	DefaultSource = "botplatform.api"
	DetailType    = "audit.event"
)

// PutEvents limits: entries per call and total entry size per call.
const (
	MaxBatchEntries = 10
	MaxBatchBytes   = 256 * 1024
)

// API is the part of *eventbridge.Client the Publisher uses.
type API interface {
	PutEvents(ctx context.Context, in *awseb.PutEventsInput, optFns ...func(*awseb.Options)) (*awseb.PutEventsOutput, error)
}

// Config configures a Publisher.
type Config struct {
	// BusName is the EventBusName (name or ARN) of the audit bus. Required: the default
	// bus would accept the events and route them nowhere.
	BusName string
	// Source is the entries' source (default DefaultSource).
	Source string
	// MaxAttempts bounds how often one entry is put when EventBridge fails it (default 4).
	MaxAttempts int
	// MinBackoff and MaxBackoff space those attempts (default 50 ms doubling to 500 ms:
	// Publish runs inside a request, so the budget is small).
	MinBackoff, MaxBackoff time.Duration
}

// Publisher puts audit events on an EventBridge bus. It is safe for concurrent use.
type Publisher struct {
	client  API
	cfg     Config
	backoff backoff.Policy // MinBackoff doubling to MaxBackoff, equal jitter
}

var _ audit.Publisher = (*Publisher)(nil)

// New returns a Publisher over client (an *eventbridge.Client built once per container).
func New(client API, cfg Config) (*Publisher, error) {
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.MinBackoff == 0 && cfg.MaxBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = 50*time.Millisecond, 500*time.Millisecond
	}
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("an EventBridge client is required"))
	}
	if cfg.BusName == "" {
		errs = append(errs, errors.New("a bus name is required"))
	}
	if cfg.MaxAttempts < 1 {
		errs = append(errs, errors.New("max attempts must be at least 1"))
	}
	if cfg.MinBackoff < 0 || cfg.MaxBackoff < cfg.MinBackoff {
		errs = append(errs, errors.New("backoff needs 0 <= min <= max"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("eventbridge publisher config: %w", err)
	}
	return &Publisher{client: client, cfg: cfg, backoff: backoff.Policy{Base: cfg.MinBackoff, Max: cfg.MaxBackoff}}, nil
}

// Publish puts one event and returns once the bus has accepted it.
func (p *Publisher) Publish(ctx context.Context, e audit.Event) error {
	return p.PublishBatch(ctx, []audit.Event{e})
}

// PublishBatch puts events in PutEvents calls of up to MaxBatchEntries entries. Entries the
// bus fails are put again, alone, with backoff, up to MaxAttempts; what still fails is
// returned as a *batch.Error (a failure's ID is the event's id).
func (p *Publisher) PublishBatch(ctx context.Context, es []audit.Event) error {
	entries := make([]types.PutEventsRequestEntry, len(es))
	for i, e := range es {
		ent, err := p.entry(e)
		if err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
		entries[i] = ent
	}
	perr := &batch.Error{What: "eventbridge: audit event(s) not published"}
	for start := 0; start < len(entries); {
		end, size := start, 0
		for end < len(entries) && end-start < MaxBatchEntries && size+entrySize(entries[end]) <= MaxBatchBytes {
			size += entrySize(entries[end])
			end++
		}
		idx := make([]int, 0, end-start)
		for i := start; i < end; i++ {
			idx = append(idx, i)
		}
		p.put(ctx, es, entries, idx, perr)
		start = end
	}
	if len(perr.Failures) > 0 {
		slices.SortFunc(perr.Failures, func(a, b batch.Failure) int { return a.Index - b.Index })
		return perr
	}
	return nil
}

// entry renders e as a bus entry. The detail is the scrubbed event: it carries ids, the
// route template and the status, never a path, query, header or body.
func (p *Publisher) entry(e audit.Event) (types.PutEventsRequestEntry, error) {
	e = e.Scrubbed()
	if err := e.Validate(); err != nil {
		return types.PutEventsRequestEntry{}, err
	}
	detail, err := json.Marshal(e)
	if err != nil {
		return types.PutEventsRequestEntry{}, fmt.Errorf("audit: encode event: %w", err)
	}
	ent := types.PutEventsRequestEntry{
		EventBusName: aws.String(p.cfg.BusName),
		Source:       aws.String(p.cfg.Source),
		DetailType:   aws.String(DetailType),
		Detail:       aws.String(string(detail)),
		Time:         aws.Time(e.Time),
	}
	if n := entrySize(ent); n > MaxBatchBytes {
		return types.PutEventsRequestEntry{}, fmt.Errorf("audit: event is %d bytes, over EventBridge's %d", n, MaxBatchBytes)
	}
	return ent, nil
}

// entrySize is an entry's size as EventBridge counts it: 14 bytes for the time plus the
// UTF-8 lengths of source, detail-type, detail and resources.
func entrySize(e types.PutEventsRequestEntry) int {
	n := len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
	if e.Time != nil {
		n += 14
	}
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

// permanent error codes: putting the entry again cannot succeed.
var permanent = map[string]bool{
	"AccessDeniedException":               true,
	"InvalidArgument":                     true,
	"MalformedDetail":                     true,
	"NotAuthorizedForSourceException":     true,
	"NotAuthorizedForDetailTypeException": true,
	"ValidationException":                 true,
}

// put sends entries[idx] and resends the ones the bus failed.
func (p *Publisher) put(ctx context.Context, es []audit.Event, entries []types.PutEventsRequestEntry, idx []int, perr *batch.Error) {
	for attempt := 1; ; attempt++ {
		call := make([]types.PutEventsRequestEntry, len(idx))
		for i, j := range idx {
			call[i] = entries[j]
		}
		out, err := p.client.PutEvents(ctx, &awseb.PutEventsInput{Entries: call})
		if err != nil {
			// The SDK has already retried throttling and 5xx; what is left is final.
			perr.Err = err
			for _, j := range idx {
				perr.Failures = append(perr.Failures, batch.Failure{Index: j, ID: es[j].ID, Code: "CallFailed", Message: err.Error()})
			}
			return
		}
		var retry []int
		var failures []batch.Failure
		for i, j := range idx {
			var r types.PutEventsResultEntry
			if i < len(out.Entries) {
				r = out.Entries[i]
			} else {
				r.ErrorCode = aws.String("NotConfirmed") // an entry missing from the answer
			}
			if r.ErrorCode == nil && r.EventId != nil {
				continue
			}
			f := batch.Failure{Index: j, ID: es[j].ID, Code: aws.ToString(r.ErrorCode), Message: aws.ToString(r.ErrorMessage)}
			if permanent[f.Code] {
				perr.Failures = append(perr.Failures, f)
				continue
			}
			retry = append(retry, j)
			failures = append(failures, f)
		}
		if len(retry) == 0 {
			return
		}
		if attempt >= p.cfg.MaxAttempts || p.backoff.Sleep(ctx, attempt) != nil {
			perr.Failures = append(perr.Failures, failures...)
			if ctx.Err() != nil {
				perr.Err = ctx.Err()
			}
			return
		}
		idx = retry
	}
}
