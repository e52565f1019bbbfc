package family

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
)

// purger is one family's step in a chained job: the purge of a deleted bot's data, the
// erasure of an erased subscriber's.
type purger struct {
	name string
	step jobs.Step
}

// purgeJob is the job that erases a deleted bot's data.
const purgeJob = purge.Job

// purgers lists in order what erases a deleted bot's data: every composed family that
// declares Purge. The channels come first: the deletion took the bot's channels already, and
// this catches one connected meanwhile, which would accept webhooks. The subscribers, the
// people's personal data, come next; then the others in the order they were composed, but
// for the email domains, last: theirs is the one step that fails while a provider does
// (SES, whose identities it deregisters), and an outage there must hold up no other
// family's erasure.
func (c *Composed) purgers() []purger {
	var out []purger
	for _, b := range c.built {
		if b.parts.Purge != nil {
			out = append(out, purger{name: b.name, step: b.parts.Purge})
		}
	}
	rank := func(name string) int {
		switch name {
		case "channels":
			return 0
		case "subscribers":
			return 1
		case "emaildomains":
			return 3
		}
		return 2
	}
	slices.SortStableFunc(out, func(a, b purger) int { return rank(a.name) - rank(b.name) })
	return out
}

// erasers lists in order what erases an erased subscriber's data: every composed family
// that declares Erase, the subscribers first (the events), then the others as composed.
func (c *Composed) erasers() []purger {
	var first, rest []purger
	for _, b := range c.built {
		switch {
		case b.parts.Erase == nil:
		case b.name == "subscribers":
			first = append(first, purger{name: b.name, step: b.parts.Erase})
		default:
			rest = append(rest, purger{name: b.name, step: b.parts.Erase})
		}
	}
	return append(first, rest...)
}

// chainCursor is where a chained job (the purge, an erasure) is: the family, by name so that
// a deploy that adds or reorders families between two steps resumes at the same place, and
// that family's cursor.
type chainCursor struct {
	Family string `json:"family"`
	Cursor string `json:"cursor,omitempty"`
}

// purgeStep is the step of the job purge.Job: the deleted bot's data, family by family.
func purgeStep(list []purger, log *slog.Logger) jobs.Step {
	return chainStep(purge.Job, list, log, "deleted bot's data erased", func(raw json.RawMessage) (string, []any, error) {
		p, err := purge.DecodePayload(raw)
		return p.BotID, []any{"account_id", p.AccountID, "bot_id", p.BotID}, err
	})
}

// eraseStep is the step of the job purge.EraseJob: what the families keep about an erased
// subscriber, family by family.
func eraseStep(list []purger, log *slog.Logger) jobs.Step {
	return chainStep(purge.EraseJob, list, log, "erased subscriber's data erased", func(raw json.RawMessage) (string, []any, error) {
		e, err := purge.DecodeErasure(raw)
		return e.SubscriberID, []any{"bot_id", e.BotID, "subscriber_id", e.SubscriberID}, err
	})
}

// chainStep is the step of a job that runs the steps of list in turn on one payload: one
// step of the current family's, then on to the next family once it is done. Every family's
// step is bounded and repeatable, so this one is too. A cursor naming a family that is no
// longer in the list starts over: the families before it have nothing left, which each
// confirms in one step. decode checks the payload and names what it is about (for errors)
// and its log attributes; finished is logged once the last family is done.
func chainStep(job string, list []purger, log *slog.Logger, finished string, decode func(json.RawMessage) (string, []any, error)) jobs.Step {
	return func(ctx context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
		what, attrs, err := decode(payload)
		if err != nil {
			return "", false, err
		}
		var at chainCursor
		if cursor != "" {
			if err := json.Unmarshal([]byte(cursor), &at); err != nil {
				return "", false, fmt.Errorf("%s: bad cursor: %w", job, err)
			}
		}
		i := slices.IndexFunc(list, func(pr purger) bool { return pr.name == at.Family })
		if i < 0 {
			i, at.Cursor = 0, ""
		}
		next, done, err := list[i].step(ctx, payload, at.Cursor)
		if err != nil {
			return "", false, fmt.Errorf("%s of %s: %w", list[i].name, what, err)
		}
		switch {
		case !done:
			at = chainCursor{Family: list[i].name, Cursor: next}
		case i+1 < len(list):
			at = chainCursor{Family: list[i+1].name}
		default:
			log.InfoContext(ctx, finished, attrs...)
			return "", true, nil
		}
		b, err := json.Marshal(at)
		if err != nil {
			return "", false, err
		}
		return string(b), false, nil
	}
}
