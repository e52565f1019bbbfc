package runtime

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// SubscriberFinder tells whether a subscriber exists (ErrNotFound when not): a trace list
// belongs to a subscriber of the bot.
type SubscriberFinder interface {
	Get(ctx context.Context, bot, id string) (Subscriber, error)
}

// Traces reads execution traces.
type Traces struct {
	store store.Store
	subs  SubscriberFinder
	now   func() time.Time
}

// NewTraces returns a trace reader.
func NewTraces(st store.Store, subs SubscriberFinder, now func() time.Time) *Traces {
	return &Traces{store: st, subs: subs, now: now}
}

// maxEntriesRead bounds the entries one GET returns: a run has at most MaxEntries.
const maxEntriesRead = MaxEntries

// Get returns a run of the bot with its steps.
func (t *Traces) Get(ctx context.Context, bot, id string) (Detail, error) {
	if !ids.Valid("exe", id) {
		return Detail{}, httpapi.NotFound("execution")
	}
	it, err := t.store.Get(ctx, headKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Detail{}, httpapi.NotFound("execution")
	}
	if err != nil {
		return Detail{}, err
	}
	rec, err := store.Decode[record](it)
	if err != nil {
		return Detail{}, err
	}
	out := Detail{Execution: rec.view(t.now()), Steps: []Entry{}}
	q := store.Query{PK: exePK(bot, id), Prefix: "S#"}
	for len(out.Steps) < maxEntriesRead {
		page, err := t.store.Query(ctx, q)
		if err != nil {
			return Detail{}, err
		}
		for _, it := range page.Items {
			e, err := store.Decode[Entry](it)
			if err != nil {
				return Detail{}, err
			}
			out.Steps = append(out.Steps, e)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return out, nil
}

// List returns one page of a subscriber's runs, newest first.
func (t *Traces) List(ctx context.Context, bot, sub string, limit int, cursor string) ([]Execution, string, error) {
	if _, err := t.subs.Get(ctx, bot, sub); errors.Is(err, ErrNotFound) {
		return nil, "", httpapi.NotFound("subscriber")
	} else if err != nil {
		return nil, "", err
	}
	page, err := t.store.Query(ctx, store.Query{Index: store.GSI1, PK: subscriberRuns(bot, sub), Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	now := t.now()
	out := make([]Execution, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[record](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.view(now))
	}
	return out, page.Next, nil
}

// Routes registers the trace routes. A trace shows what the bot did and why (its steps,
// branches and provider outcomes) with everything the subscriber sent redacted, so reading
// one needs the reactions:read scope and no right beyond reaching the bot, like reading the
// reactions themselves (docs/runtime.md, "Access").
func Routes(mux *httpapi.Mux, t *Traces, cursors *httpapi.Cursors) {
	h := &handlers{t: t, cursors: cursors}
	mux.Handle("GET /api/bots/{botID}/subscribers/{subscriberID}/executions", httpapi.Need("reactions:read"), h.list)
	mux.Handle("GET /api/bots/{botID}/executions/{executionID}", httpapi.Need("reactions:read"), h.get)
}

type handlers struct {
	t       *Traces
	cursors *httpapi.Cursors
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Execution, string, error) {
		return h.t.List(r.Context(), r.PathValue("botID"), r.PathValue("subscriberID"), limit, cursor)
	})
}

func (h *handlers) get(w http.ResponseWriter, r *http.Request) error {
	d, err := h.t.Get(r.Context(), r.PathValue("botID"), r.PathValue("executionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}
