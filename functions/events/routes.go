package events

import (
	"net/http"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the event routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the event routes. Every one needs the bot's Analytics right and the
// analytics plan feature; posting needs analytics:write, reading analytics:read.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const base = "/api/bots/{botID}/events"
	read := httpapi.Need("analytics:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	write := httpapi.Need("analytics:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	mux.Handle("POST "+base, write, h.post)
	mux.Handle("GET "+base, read, h.list)
	mux.Handle("GET "+base+"/counts", read, h.counts)
}

func (h *Handlers) post(w http.ResponseWriter, r *http.Request) error {
	var req PostRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	res, err := h.svc.Ingest(r.Context(), r.PathValue("botID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := Filter{Name: q.Get("name"), SubscriberID: q.Get("subscriber_id")}
	if q.Has("name") {
		if err := eventlog.CheckName(f.Name); err != nil {
			return httpapi.InvalidParam("name", "name "+err.Error())
		}
	}
	if q.Has("subscriber_id") && !subscriberID(f.SubscriberID) {
		return httpapi.InvalidParam("subscriber_id", "subscriber_id must be a subscriber id such as sub_...")
	}
	var err error
	if f.From, f.To, err = h.timeRange(q.Get("from"), q.Get("to")); err != nil {
		return err
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]View, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), f, limit, cursor)
	})
}

// timeRange reads a list's from and to (RFC 3339): to defaults to the latest time an event
// can have (now plus MaxFuture), from to DefaultDays before to.
func (h *Handlers) timeRange(fromS, toS string) (from, to time.Time, err error) {
	to = h.svc.now().Add(MaxFuture).UTC()
	if toS != "" {
		if to, err = time.Parse(time.RFC3339Nano, toS); err != nil {
			return from, to, httpapi.InvalidParam("to", "to must be an RFC 3339 time such as 2026-01-01T00:00:00Z")
		}
	}
	from = to.AddDate(0, 0, -DefaultDays)
	if fromS != "" {
		if from, err = time.Parse(time.RFC3339Nano, fromS); err != nil {
			return from, to, httpapi.InvalidParam("from", "from must be an RFC 3339 time such as 2026-01-01T00:00:00Z")
		}
	}
	from, to = from.UTC(), to.UTC()
	switch {
	case !to.After(from):
		return from, to, httpapi.InvalidParam("to", "to must be after from")
	case to.Sub(from) > MaxRange:
		return from, to, httpapi.RangeTooLong(to.Sub(from), MaxRangeDays)
	}
	return from, to, nil
}

func (h *Handlers) counts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	names := q["name"]
	if len(names) > MaxCountNames {
		return httpapi.InvalidParam("name", "at most "+strconv.Itoa(MaxCountNames)+" names")
	}
	for _, n := range names {
		if err := eventlog.CheckName(n); err != nil {
			return httpapi.InvalidParam("name", "name "+err.Error())
		}
	}
	last := day(h.svc.now())
	if s := q.Get("to"); s != "" || q.Has("to") {
		var err error
		if last, err = time.Parse(time.DateOnly, s); err != nil {
			return httpapi.InvalidParam("to", "to must be a date YYYY-MM-DD (a UTC day)")
		}
	}
	first := last.AddDate(0, 0, -(DefaultDays - 1))
	if s := q.Get("from"); s != "" || q.Has("from") {
		var err error
		if first, err = time.Parse(time.DateOnly, s); err != nil {
			return httpapi.InvalidParam("from", "from must be a date YYYY-MM-DD (a UTC day)")
		}
	}
	if first.After(last) {
		return httpapi.InvalidParam("from", "from must not be after to")
	}
	if days := int(last.Sub(first).Hours()/24) + 1; days > MaxRangeDays {
		return httpapi.RangeTooLong(time.Duration(days)*24*time.Hour, MaxRangeDays)
	}
	res, err := h.svc.Counts(r.Context(), r.PathValue("botID"), first, last, names)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

func day(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
