// Package flowintel serves flow intelligence (docs/flowintel.md): per reaction version and
// step, how many runs entered, completed, went on, stopped or failed there and how long they
// stayed (an overlay over the reaction's steps, from shared/flowstats' counters); redacted
// sample runs per step, from the runtime's execution traces; the account's policy of what
// may be sampled; and bounded reaggregation jobs that rebuild the counters from the traces.
package flowintel

import (
	"context"
	"encoding/json"
	"time"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// FlowStep is one step of a reaction version.
type FlowStep struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Flow is a reaction version's steps, in order.
type Flow struct {
	ReactionID string
	Version    int64
	Steps      []FlowStep
}

// Flows reads reaction versions (the reactions family).
type Flows interface {
	// Flow returns version n of the bot's reaction, n 0 the newest published one; an
	// httpapi not-found error when the reaction, the version or (n 0) any published version
	// does not exist.
	Flow(ctx context.Context, bot, reaction string, n int64) (Flow, error)
}

// Run is a recorded run of a reaction (the runtime's trace head).
type Run struct {
	ID         string    `json:"-"`
	ReactionID string    `json:"reaction_id"`
	Version    int64     `json:"reaction_version"`
	Channel    string    `json:"channel"`
	Status     string    `json:"status"`
	EndReason  *string   `json:"end_reason"`
	StartedAt  time.Time `json:"started_at"`
	// Trigger is the trace's trigger, as the runtime records it (redacted by sample).
	Trigger json.RawMessage `json:"-"`
	// Load reads the run's entries and the flow counter increments its transitions made.
	Load func(ctx context.Context) (RunDetail, error) `json:"-"`
}

// RunDetail is what Run.Load reads.
type RunDetail struct {
	Steps    []Entry
	Counters []store.Write
}

// Entry is one recorded step of a run, as the runtime's trace has it.
type Entry struct {
	Seq        int            `json:"seq"`
	StepID     string         `json:"step_id"`
	Type       string         `json:"type"`
	At         time.Time      `json:"at"`
	DurationMS float64        `json:"duration_ms"`
	Attempts   int            `json:"attempts"`
	Input      map[string]any `json:"input,omitempty"`
	Decision   map[string]any `json:"decision,omitempty"`
	Outcome    map[string]any `json:"outcome,omitempty"`
	Error      *StepError     `json:"error,omitempty"`
}

// StepError is a step's failure: kinds and the provider's code and reason (which name rules,
// never what the subscriber sent), and the platform's message.
type StepError struct {
	Kind           string `json:"kind"`
	ProviderCode   string `json:"provider_code,omitempty"`
	ProviderReason string `json:"provider_reason,omitempty"`
	Message        string `json:"message"`
}

// Runs reads the bot's recorded runs (the runtime's run index).
type Runs interface {
	// Recent calls fn with the bot's runs, newest first (by start), reading at most max
	// index entries; fn returns false to stop.
	Recent(ctx context.Context, bot string, max int, fn func(Run) (bool, error)) error
}

// Config are a Service's dependencies.
type Config struct {
	Store store.Store
	Flows Flows
	Runs  Runs
	// Jobs starts reaggregation jobs (nil: a process without a queue answers 503).
	Jobs jobs.Starter
	Now  func() time.Time
	// TraceRetention is how long the runtime keeps a run after its last write
	// (runtime.Retention): days older are not rebuilt.
	TraceRetention time.Duration
}

// Service is flow intelligence.
type Service struct {
	store     store.Store
	flows     Flows
	runs      Runs
	jobs      jobs.Starter
	now       func() time.Time
	retention time.Duration
}

// NewService returns a Service.
func NewService(c Config) *Service {
	if c.TraceRetention <= 0 {
		c.TraceRetention = 30 * 24 * time.Hour
	}
	return &Service{store: c.Store, flows: c.Flows, runs: c.Runs, jobs: c.Jobs, now: c.Now, retention: c.TraceRetention}
}
