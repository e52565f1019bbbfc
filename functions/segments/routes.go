package segments

import (
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the segment routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the segment routes. Segments are computed from analytics, so reading
// one needs what reading a report needs (analytics:read, the Analytics right, the
// analytics plan feature); deleting one needs segments:write, the scope that saves them.
// They are saved by the routes of the families that compute them (a funnel's cohorts).
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const (
		segments = "/api/bots/{botID}/segments"
		segment  = segments + "/{segmentID}"
	)
	read := httpapi.Need("analytics:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	write := httpapi.Need("segments:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	mux.Handle("GET "+segments, read, h.list)
	mux.Handle("GET "+segment, read, h.get)
	mux.Handle("GET "+segment+"/members", read, h.members)
	mux.Handle("DELETE "+segment, write, h.delete)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Segment, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	seg, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("segmentID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, seg)
}

// Member is one member of a segment, as the members list shows it.
type Member struct {
	SubscriberID string `json:"subscriber_id"`
}

func (h *Handlers) members(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Member, string, error) {
		ids, next, err := h.svc.Members(r.Context(), r.PathValue("botID"), r.PathValue("segmentID"), cursor, limit)
		if err != nil {
			return nil, "", err
		}
		out := make([]Member, len(ids))
		for i, id := range ids {
			out[i] = Member{SubscriberID: id}
		}
		return out, next, nil
	})
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("segmentID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
