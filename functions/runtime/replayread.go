package runtime

import (
	"context"
	"errors"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// RunFilter narrows a listing of a bot's runs (Traces.Runs); a zero member keeps every run.
type RunFilter struct {
	ReactionID string
	Status     Status
}

// MaxRunsScanned bounds the run index items one page of Traces.Runs reads (each costs a read
// of the run's head): with a filter that few runs meet, a page comes back short, even empty,
// with a cursor to go on from (docs/replay.md, "Listing runs").
const MaxRunsScanned = 200

// Runs returns one page of the bot's runs as a client reads them (Execution), newest first
// (run ids sort by start time), from the bot's run index, keeping those f selects. At most
// MaxRunsScanned index items are read. The cursor is the id of the last run read ("" for
// the first page), so a page may end anywhere in the store's pages; next is "" when the
// index is exhausted.
func (t *Traces) Runs(ctx context.Context, bot string, f RunFilter, limit int, cursor string) ([]Execution, string, error) {
	if cursor != "" && !ids.Valid("exe", cursor) {
		return nil, "", errors.New("runtime: a run cursor is a run id")
	}
	now := t.now()
	out := []Execution{}
	// To is inclusive: the cursor's own item is read again and skipped.
	q := store.Query{PK: runsPK(bot), Reverse: true, To: cursor, Limit: MaxRunsScanned}
	read, last := 0, ""
	for {
		page, err := t.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for _, it := range page.Items {
			if it.SK == cursor {
				continue
			}
			if read >= MaxRunsScanned || len(out) >= limit {
				return out, last, nil
			}
			read++
			last = it.SK
			if !ids.Valid("exe", it.SK) {
				continue
			}
			head, err := t.store.Get(ctx, headKey(bot, it.SK))
			if errors.Is(err, store.ErrNotFound) {
				continue // expired meanwhile
			}
			if err != nil {
				return nil, "", err
			}
			rec, err := store.Decode[record](head)
			if err != nil {
				return nil, "", err
			}
			v := rec.view(now)
			if (f.ReactionID != "" && v.ReactionID != f.ReactionID) || (f.Status != "" && v.Status != f.Status) {
				continue
			}
			out = append(out, v)
		}
		if page.Next == "" {
			return out, "", nil
		}
		q.Cursor = page.Next
	}
}
