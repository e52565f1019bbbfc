package runtime

import (
	"context"
	"errors"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// RecentRuns calls fn with the bot's runs as a client reads them (Execution), newest first
// (run ids sort by start time), from the bot's run index: at most max index items are read,
// runs whose head expired meanwhile included (and skipped). fn returns false to stop.
func (t *Traces) RecentRuns(ctx context.Context, bot string, max int, fn func(Execution) (bool, error)) error {
	now := t.now()
	q := store.Query{PK: runsPK(bot), Reverse: true, Limit: min(max, 200)}
	seen := 0
	for seen < max {
		page, err := t.store.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if seen >= max {
				return nil
			}
			seen++
			if !ids.Valid("exe", it.SK) {
				continue
			}
			head, err := t.store.Get(ctx, headKey(bot, it.SK))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			rec, err := store.Decode[record](head)
			if err != nil {
				return err
			}
			more, err := fn(rec.view(now))
			if err != nil || !more {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		q.Cursor = page.Next
	}
	return nil
}

// Steps returns the entries of one of the bot's runs, in order (none for a run that
// expired).
func (t *Traces) Steps(ctx context.Context, bot, exe string) ([]Entry, error) {
	out := []Entry{}
	q := store.Query{PK: exePK(bot, exe), Prefix: "S#"}
	for len(out) < maxEntriesRead {
		page, err := t.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			e, err := store.Decode[Entry](it)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return out, nil
}

// FlowWrites returns the flow counter increments (shared/flowstats) that run d's recorded
// transitions made when they were stored: the rule of analytics.go applied to its trace.
// Rebuilding the counters from the traces (the flowintel family's reaggregation) sums
// these, so a rebuild and live counting agree on the same runs.
func FlowWrites(d Detail) []store.Write {
	f := flowTracker{bot: d.BotID, reaction: d.ReactionID, version: d.ReactionVersion}
	var out []store.Write
	for i := range d.Steps {
		out = append(out, f.entry(&d.Steps[i])...)
	}
	// A buttons wait past its end reads as completed (buttons_expired): not a normal end.
	return append(out, f.end(d.Status, d.EndReason, d.EndedAt)...)
}
