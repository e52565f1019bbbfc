package wiring

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/httpapi"
)

// transcripts writes a subscriber's conversation runs (functions/runtime's traces) as the
// plain text of a CRM note: one line per trigger and per message the bot sent, oldest
// first. The platform never stores what a subscriber wrote, so their messages show as what
// they were (text, a button) and their length.
type transcripts struct{ traces *runtime.Traces }

func (t transcripts) Transcript(ctx context.Context, bot, sub string, runs int) (string, int, error) {
	execs, _, err := t.traces.List(ctx, bot, sub, runs, "")
	if err != nil {
		return "", 0, err
	}
	slices.Reverse(execs) // oldest first
	var b strings.Builder
	b.WriteString("Conversation exported from the bot platform\n")
	for _, e := range execs {
		d, err := t.traces.Get(ctx, bot, e.ID)
		if err != nil {
			return "", 0, err
		}
		fmt.Fprintf(&b, "\n%s  %s\n", d.StartedAt.UTC().Format("2006-01-02 15:04 UTC"), trigger(d.Trigger))
		for _, s := range d.Steps {
			if id, _ := s.Outcome["message_id"].(string); id == "" {
				continue
			}
			fmt.Fprintf(&b, "%s  Bot: %s\n", s.At.UTC().Format("15:04:05"), sent(s))
		}
	}
	return b.String(), len(execs), nil
}

func trigger(tr runtime.TriggerInfo) string {
	switch {
	case tr.Message != nil && tr.Message.Kind == "text":
		return fmt.Sprintf("Subscriber sent a message (%d characters)", tr.Message.Length)
	case tr.Message != nil:
		return "Subscriber pressed a button"
	case tr.Keyword != "":
		// A keyword matches the whole message: naming it would repeat what they wrote.
		return "Subscriber wrote a keyword"
	case tr.Type != "":
		return "Conversation started (" + tr.Type + ")"
	}
	return "Conversation started"
}

// sent describes a message the bot sent from what the step recorded of it.
func sent(e runtime.Entry) string {
	for _, k := range []string{"text", "caption"} {
		if v, _ := e.Input[k].(string); v != "" {
			return v
		}
	}
	if v, _ := e.Input["media_type"].(string); v != "" {
		return "[" + v + "]"
	}
	return "[" + e.Type + "]"
}

// traceSubscribers tells the trace reader whether a subscriber exists.
type traceSubscribers struct{ svc *subscribers.Service }

func (a traceSubscribers) Get(ctx context.Context, bot, id string) (runtime.Subscriber, error) {
	s, err := a.svc.Get(ctx, bot, id)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return runtime.Subscriber{}, fmt.Errorf("%w: %w", runtime.ErrNotFound, err)
	}
	if err != nil {
		return runtime.Subscriber{}, err
	}
	return runtime.Subscriber{ID: s.ID}, nil
}
