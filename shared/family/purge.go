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

// purger is one owner of a deleted bot's data, as the purge job runs it.
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

// purgeCursor is where a purge job is: the family, by name so that a deploy that adds or
// reorders families between two steps resumes at the same place, and that family's cursor.
type purgeCursor struct {
	Family string `json:"family"`
	Cursor string `json:"cursor,omitempty"`
}

// purgeStep is the step of the job purge.Job: one step of the current family's purge, then
// on to the next family once it is done. Every family's step is bounded and repeatable, so
// this one is too. A cursor naming a family that no longer purges starts over: the families
// before it are empty, which each confirms in one step.
func purgeStep(list []purger, log *slog.Logger) jobs.Step {
	return func(ctx context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
		p, err := purge.DecodePayload(payload)
		if err != nil {
			return "", false, err
		}
		var at purgeCursor
		if cursor != "" {
			if err := json.Unmarshal([]byte(cursor), &at); err != nil {
				return "", false, fmt.Errorf("%s: bad cursor: %w", purge.Job, err)
			}
		}
		i := slices.IndexFunc(list, func(pr purger) bool { return pr.name == at.Family })
		if i < 0 {
			i, at.Cursor = 0, ""
		}
		next, done, err := list[i].step(ctx, payload, at.Cursor)
		if err != nil {
			return "", false, fmt.Errorf("%s of %s: %w", list[i].name, p.BotID, err)
		}
		switch {
		case !done:
			at = purgeCursor{Family: list[i].name, Cursor: next}
		case i+1 < len(list):
			at = purgeCursor{Family: list[i+1].name}
		default:
			log.InfoContext(ctx, "deleted bot's data erased", "account_id", p.AccountID, "bot_id", p.BotID)
			return "", true, nil
		}
		b, err := json.Marshal(at)
		if err != nil {
			return "", false, err
		}
		return string(b), false, nil
	}
}
