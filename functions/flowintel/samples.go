package flowintel

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/httpapi"
)

// Bounds of a samples request.
const (
	MaxSamples     = 20
	DefaultSamples = 5
	// ScanLimit bounds the runs one request reads from the bot's run index, newest first.
	ScanLimit = 1000
)

// Sample is one redacted run that entered the step. It names neither the run nor the
// subscriber: no execution id (which leads to a trace naming the subscriber), no subscriber
// id, no update id, no provider message id, no goto's run id. It keeps what the bot did:
// bot-authored inputs, decisions, what each outcome was (a message sent, a label added)
// and failures' kinds.
type Sample struct {
	ReactionID string         `json:"reaction_id"`
	Version    int64          `json:"reaction_version"`
	Channel    string         `json:"channel"`
	Status     string         `json:"status"`
	EndReason  *string        `json:"end_reason"`
	StartedAt  time.Time      `json:"started_at"`
	Trigger    map[string]any `json:"trigger"`
	Steps      []Entry        `json:"steps"`
}

// Samples is the answer of GET .../samples.
type Samples struct {
	Data []Sample `json:"data"`
	// RunsScanned is how many runs of the bot's index were read (at most ScanLimit);
	// RetentionDays the policy's, which no sample is older than.
	RunsScanned   int `json:"runs_scanned"`
	ScanLimit     int `json:"scan_limit"`
	RetentionDays int `json:"retention_days"`
}

func parseLimit(s string) (int, error) {
	if s == "" {
		return DefaultSamples, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxSamples {
		return 0, httpapi.InvalidParam("limit", "limit must be 1 to 20")
	}
	return n, nil
}

// Samples returns up to limit recent redacted runs of the reaction (of version, 0 any) that
// entered step, under the account's policy: 409 sampling_disabled when it disables
// sampling; runs that started before its retention are not shown.
func (s *Service) Samples(ctx context.Context, acct, bot, reaction, step string, version int64, limit int) (Samples, error) {
	pol, err := s.Policy(ctx, acct)
	if err != nil {
		return Samples{}, err
	}
	if pol.Sampling != SamplingEnabled {
		return Samples{}, httpapi.E(httpapi.KindConflict, "sampling_disabled",
			"the account's flow intelligence policy disables sampling (PUT .../flow-intelligence/policy)")
	}
	if _, err := s.flows.Flow(ctx, bot, reaction, version); err != nil {
		return Samples{}, err
	}
	cutoff := s.now().Add(-time.Duration(pol.RetentionDays) * 24 * time.Hour)
	out := Samples{Data: []Sample{}, ScanLimit: ScanLimit, RetentionDays: pol.RetentionDays}
	err = s.runs.Recent(ctx, bot, ScanLimit, func(r Run) (bool, error) {
		out.RunsScanned++
		if r.StartedAt.Before(cutoff) {
			return false, nil // newest first: every later run is older still
		}
		if r.ReactionID != reaction || (version != 0 && r.Version != version) {
			return true, nil
		}
		d, err := r.Load(ctx)
		if err != nil {
			return false, err
		}
		entered := false
		for _, e := range d.Steps {
			entered = entered || e.StepID == step
		}
		if entered {
			out.Data = append(out.Data, sample(r, d.Steps, pol.SampleTriggerDetails))
		}
		return len(out.Data) < limit, nil
	})
	return out, err
}

// sample redacts a run.
func sample(r Run, steps []Entry, triggerDetails bool) Sample {
	out := Sample{ReactionID: r.ReactionID, Version: r.Version, Channel: r.Channel, Status: r.Status, EndReason: r.EndReason,
		StartedAt: r.StartedAt, Trigger: redactTrigger(r.Trigger, triggerDetails), Steps: make([]Entry, 0, len(steps))}
	for _, e := range steps {
		e.Outcome = redactOutcome(e.Outcome)
		out.Steps = append(out.Steps, e)
	}
	return out
}

// redactTrigger keeps the trigger's type and reason; with details, also the bot-authored
// part that matched (keyword, pattern, payload, label) and the redacted kind and length of
// what the subscriber sent. Never the update id or another run's id.
func redactTrigger(raw json.RawMessage, details bool) map[string]any {
	var t map[string]any
	_ = json.Unmarshal(raw, &t)
	out := map[string]any{}
	keep := []string{"type", "reason"}
	if details {
		keep = append(keep, "keyword", "pattern", "payload", "label_id", "message")
	}
	for _, k := range keep {
		if v, ok := t[k]; ok {
			out[k] = v
		}
	}
	return out
}

// redactOutcome drops the provider's message id (message_sent says a message went out)
// and the id of the run a goto started.
func redactOutcome(o map[string]any) map[string]any {
	if o == nil {
		return nil
	}
	out := maps.Clone(o)
	if _, ok := out["message_id"]; ok {
		delete(out, "message_id")
		out["message_sent"] = true
	}
	delete(out, "execution_id")
	return out
}
