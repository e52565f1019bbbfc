// Package stats serves a bot's activity statistics: counters that other families maintain
// on write (shared/stats), read as a UTC time series. docs/stats.md explains the response.
package stats

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	counters "github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store"
)

// Handlers serves the stats route.
type Handlers struct {
	store store.Store
}

// Routes registers the stats route. Statistics are analytics, so like funnel and experiment
// reports they need the Analytics right; bot API tokens may read their own bot's.
func Routes(mux *httpapi.Mux, st store.Store) {
	h := &Handlers{store: st}
	mux.Handle("GET /api/bots/{botID}/stats", httpapi.Need("stats:read", auth.RightAnalytics), h.get)
}

// rangeQuery is a parsed stats query.
type rangeQuery struct {
	granularity counters.Granularity
	from, to    time.Time
}

// parseRange reads granularity, from and to, naming the first bad parameter. Fractions of
// a second are dropped: buckets are hours or days, and API times are whole seconds.
func parseRange(q url.Values) (rangeQuery, error) {
	rq := rangeQuery{granularity: counters.Day}
	switch g := q.Get("granularity"); g {
	case "", string(counters.Day):
	case string(counters.Hour):
		rq.granularity = counters.Hour
	default:
		return rq, httpapi.InvalidParam("granularity", "granularity must be day or hour")
	}
	var err error
	if rq.from, err = parseTime(q, "from"); err != nil {
		return rq, err
	}
	if rq.to, err = parseTime(q, "to"); err != nil {
		return rq, err
	}
	var re *counters.ErrRange
	if err := counters.CheckRange(rq.granularity, rq.from, rq.to); errors.As(err, &re) {
		return rq, httpapi.InvalidParam("to", re.Reason)
	} else if err != nil {
		return rq, err
	}
	return rq, nil
}

func parseTime(q url.Values, name string) (time.Time, error) {
	s := q.Get(name)
	if s == "" {
		return time.Time{}, httpapi.InvalidParam(name, name+" is required: an RFC 3339 time such as 2026-01-01T00:00:00Z")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, httpapi.InvalidParam(name, name+" must be an RFC 3339 time such as 2026-01-01T00:00:00Z (in a query string, encode + as %2B)")
	}
	return t.UTC().Truncate(time.Second), nil
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	rq, err := parseRange(r.URL.Query())
	if err != nil {
		return err
	}
	s, err := counters.Query(r.Context(), h.store, r.PathValue("botID"), rq.granularity, rq.from, rq.to)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, s)
}
