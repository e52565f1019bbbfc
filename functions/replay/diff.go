package replay

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/botplatform/api/functions/runtime"
)

// Compare lists how actual's path differs from expected's, entry by entry (by seq), then
// at the run's end. Times, durations, attempts and ids (message ids, the run a goto started,
// the version it started, a wait's end) are not compared: they are the world's, not the
// flow's. An entry whose step changed is not compared further.
func Compare(expected, actual runtime.SimResult) []Difference {
	out := []Difference{}
	for i := 0; i < max(len(expected.Steps), len(actual.Steps)); i++ {
		seq := i + 1
		switch {
		case i >= len(actual.Steps):
			e := expected.Steps[i]
			out = append(out, Difference{Seq: seq, Kind: DiffMissing, StepID: e.StepID, Expected: stepOf(e), Actual: nil})
			continue
		case i >= len(expected.Steps):
			a := actual.Steps[i]
			out = append(out, Difference{Seq: seq, Kind: DiffExtra, StepID: a.StepID, Expected: nil, Actual: stepOf(a)})
			continue
		}
		e, a := expected.Steps[i], actual.Steps[i]
		if e.StepID != a.StepID || e.Type != a.Type {
			out = append(out, Difference{Seq: seq, Kind: DiffStep, StepID: e.StepID, Expected: stepOf(e), Actual: stepOf(a)})
			continue
		}
		if de, da := canonical(e.Decision), canonical(a.Decision); de != da {
			out = append(out, Difference{Seq: seq, Kind: DiffDecision, StepID: e.StepID, Expected: plain(e.Decision), Actual: plain(a.Decision)})
		}
		if oe, oa := OutcomeKind(e), OutcomeKind(a); oe != oa {
			out = append(out, Difference{Seq: seq, Kind: DiffOutcome, StepID: e.StepID, Expected: oe, Actual: oa})
		}
	}
	if expected.Status != actual.Status {
		out = append(out, Difference{Kind: DiffStatus, Expected: expected.Status, Actual: actual.Status})
	}
	if re, ra := reason(expected.EndReason), reason(actual.EndReason); re != ra {
		out = append(out, Difference{Kind: DiffEndReason, Expected: nullable(re), Actual: nullable(ra)})
	}
	if ke, ka := errKind(expected.Error), errKind(actual.Error); ke != ka {
		out = append(out, Difference{Kind: DiffError, Expected: nullable(ke), Actual: nullable(ka)})
	}
	return out
}

// stepOf names an entry in a difference.
func stepOf(e runtime.Entry) map[string]any {
	return map[string]any{"step_id": e.StepID, "type": e.Type}
}

// volatile are the outcome members whose values the world decides: only their presence is
// compared. reaction_version (the version a goto started, which only a recorded run knows)
// is not compared at all.
var volatile = []string{"message_id", "execution_id", "until", "waiting_until"}

// OutcomeKind is the comparable form of what an entry did: "error:<kind>" for a failed
// step, else its outcome's members, sorted, as name=value (JSON), with the volatile ones by
// name alone: "message_id", "added=true", "message_id,sent_as=\"inline\"".
func OutcomeKind(e runtime.Entry) string {
	if e.Error != nil {
		return "error:" + e.Error.Kind
	}
	keys := make([]string, 0, len(e.Outcome))
	for k := range e.Outcome {
		if k != "reaction_version" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	// volatile members by name, the rest with their values
	for i, k := range keys {
		if slices.Contains(volatile, k) {
			parts[i] = k
			continue
		}
		parts[i] = k + "=" + canonical(e.Outcome[k])
	}
	return strings.Join(parts, ",")
}

// canonical is v's JSON after a round trip, so a trace read from the store (float64s,
// []any) and one built in process (ints, typed slices) compare equal; maps' keys sort.
func canonical(v any) string {
	b, err := json.Marshal(plain(v))
	if err != nil {
		return ""
	}
	return string(b)
}

// plain is v as decoded JSON; nil for an empty map, which a trace leaves out.
func plain(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

func reason(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func errKind(e *runtime.StepError) string {
	if e == nil {
		return ""
	}
	return e.Kind
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
