package replay

import (
	"strconv"

	"github.com/botplatform/api/functions/runtime"
)

// Redact returns the form of a recorded run that no agent-facing answer goes beyond: what
// identifies the subscriber or the provider's records of them is removed. The subscriber id
// is emptied; the provider's update id and the inbound email's id are dropped from the
// trigger; every provider message id in the steps becomes a placeholder, msg_1, msg_2, ...
// in order of first appearance, the same id always the same placeholder, so the path (and a
// simulation of it) reads the same. Bot-authored content stays, as in the trace itself. The
// trace GET (GET .../replay/executions/{id}) is the only answer with the identifying data.
func Redact(d runtime.Detail) runtime.Detail {
	out := d
	out.SubscriberID = ""
	out.Trigger.UpdateID = ""
	out.Trigger.InboundMessageID = ""
	names := map[string]string{}
	placeholder := func(id string) string {
		if p, ok := names[id]; ok {
			return p
		}
		p := "msg_" + strconv.Itoa(len(names)+1)
		names[id] = p
		return p
	}
	out.Steps = make([]runtime.Entry, len(d.Steps))
	for i, e := range d.Steps {
		if id, ok := e.Outcome["message_id"].(string); ok && id != "" {
			o := make(map[string]any, len(e.Outcome))
			for k, v := range e.Outcome {
				o[k] = v
			}
			o["message_id"] = placeholder(id)
			e.Outcome = o
		}
		out.Steps[i] = e
	}
	return out
}

// FixtureInput is the input a fixture keeps of a recorded run: runtime.RecordedInput of its
// redacted form (Redact), without links to other runs. It holds no sample subscriber:
// conditions take their results from the recorded facts.
func FixtureInput(d runtime.Detail) runtime.SimInput {
	in := runtime.RecordedInput(Redact(d))
	in.Trigger.FromExecutionID = ""
	in.Trigger.UpdateID = ""
	in.Trigger.InboundMessageID = ""
	in.Subscriber = nil
	return in
}

// recordedPath is a recorded run as a path to compare (Compare).
func recordedPath(d runtime.Detail) runtime.SimResult {
	return runtime.SimResult{Status: d.Status, EndReason: d.EndReason, Error: d.Error, Steps: d.Steps}
}
