package webpush

import (
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the family's routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the browser push routes (spec 4.4): reading needs the Analytics right,
// changing and sending the Reactions right; both need the web_push plan feature.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const base = "/api/bots/{botID}/web-push"
	read := httpapi.Need("web_push:read", auth.RightAnalytics).InPlan(auth.FeatureWebPush)
	write := httpapi.Need("web_push:write", auth.RightReactions).InPlan(auth.FeatureWebPush)
	mux.Handle("GET "+base, read, h.get)
	mux.Handle("GET "+base+"/subscriptions", read, h.subscriptions)
	mux.Handle("GET "+base+"/report", read, h.report)
	mux.Handle("POST "+base+"/enable", write, h.enable)
	mux.Handle("PATCH "+base, write, h.update)
	mux.Handle("POST "+base+"/rotate-keys", write, h.rotate)
	mux.Handle("POST "+base+"/test", write, h.test)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	st, err := h.svc.Get(r.Context(), r.PathValue("botID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, st)
}

func (h *Handlers) subscriptions(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Subscription, string, error) {
		return h.svc.Subscriptions(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) report(w http.ResponseWriter, r *http.Request) error {
	rep, err := h.svc.Report(r.Context(), r.PathValue("botID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}

func (h *Handlers) enable(w http.ResponseWriter, r *http.Request) error {
	var req Enable
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	st, created, err := h.svc.Enable(r.Context(), r.PathValue("botID"), req)
	if err != nil {
		return err
	}
	if created {
		return httpapi.WriteJSON(w, http.StatusCreated, st)
	}
	return httpapi.WriteJSON(w, http.StatusOK, st)
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req Change
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	st, err := h.svc.Update(r.Context(), r.PathValue("botID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, st)
}

// RotateRequest is the body of POST .../web-push/rotate-keys.
type RotateRequest struct {
	// Confirm acknowledges that every subscription expires.
	Confirm          bool   `json:"confirm"`
	ExpectedRevision *int64 `json:"expected_revision"`
}

func (h *Handlers) rotate(w http.ResponseWriter, r *http.Request) error {
	var req RotateRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	rot, err := h.svc.RotateKeys(r.Context(), r.PathValue("botID"), req.Confirm, req.ExpectedRevision)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rot)
}

func (h *Handlers) test(w http.ResponseWriter, r *http.Request) error {
	var req TestSendRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	out, err := h.svc.TestSend(r.Context(), r.PathValue("botID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}
