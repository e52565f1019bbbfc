package crm

import (
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// syncRoutes registers a connection's sync jobs and conflicts under conn, with the
// connection routes' access.
func (h *Handlers) syncRoutes(mux *httpapi.Mux, conn string, read, write httpapi.Access) {
	mux.Handle("POST "+conn+"/jobs", write, h.startJob)
	mux.Handle("GET "+conn+"/jobs", read, h.jobs)
	mux.Handle("GET "+conn+"/jobs/{jobID}", read, h.job)
	mux.Handle("GET "+conn+"/jobs/{jobID}/errors", read, h.jobErrors)
	mux.Handle("POST "+conn+"/jobs/{jobID}/cancel", write, h.cancelJob)
	mux.Handle("GET "+conn+"/conflicts", read, h.conflicts)
	mux.Handle("GET "+conn+"/conflicts/{conflictID}", read, h.conflict)
	mux.Handle("POST "+conn+"/conflicts/{conflictID}/resolve", write, h.resolve)
}

// SubscriberRoutes registers the per-subscriber CRM actions (spec 4.2): the subscribers
// scopes and the Dialogs right, as the subscriber's own routes, in the crm plan feature.
func SubscriberRoutes(mux *httpapi.Mux, h *Handlers) {
	const base = "/api/bots/{botID}/subscribers/{subscriberID}/crm"
	read := httpapi.Need("subscribers:read", auth.RightDialogs).InPlan(auth.FeatureCRM)
	write := httpapi.Need("subscribers:write", auth.RightDialogs).InPlan(auth.FeatureCRM)
	mux.Handle("GET "+base, read, h.subscriberCRM)
	mux.Handle("GET "+base+"/deals", read, h.subscriberDeals)
	mux.Handle("POST "+base+"/sync", write, h.syncSubscriber)
	mux.Handle("POST "+base+"/notes", write, h.exportNote)
}

func (h *Handlers) startJob(w http.ResponseWriter, r *http.Request) error {
	var req StartJobRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot, conn := r.PathValue("botID"), r.PathValue("connectionID")
	j, err := h.svc.StartJob(r.Context(), bot, conn, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/crm/connections/"+conn+"/jobs/"+j.ID)
	return httpapi.WriteJSON(w, http.StatusAccepted, j)
}

func (h *Handlers) jobs(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Job, string, error) {
		return h.svc.Jobs(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), limit, cursor)
	})
}

func (h *Handlers) job(w http.ResponseWriter, r *http.Request) error {
	j, err := h.svc.GetJob(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), r.PathValue("jobID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, j)
}

func (h *Handlers) jobErrors(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]JobError, string, error) {
		return h.svc.JobErrors(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), r.PathValue("jobID"), limit, cursor)
	})
}

func (h *Handlers) cancelJob(w http.ResponseWriter, r *http.Request) error {
	if err := httpapi.DecodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	j, err := h.svc.CancelJob(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), r.PathValue("jobID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, j)
}

func (h *Handlers) conflicts(w http.ResponseWriter, r *http.Request) error {
	status := r.URL.Query().Get("status")
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Conflict, string, error) {
		return h.svc.Conflicts(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), status, limit, cursor)
	})
}

func (h *Handlers) conflict(w http.ResponseWriter, r *http.Request) error {
	c, err := h.svc.Conflict(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), r.PathValue("conflictID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

func (h *Handlers) resolve(w http.ResponseWriter, r *http.Request) error {
	var req ResolveRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	c, err := h.svc.Resolve(r.Context(), httpapi.Caller(r), r.PathValue("botID"), r.PathValue("connectionID"), r.PathValue("conflictID"), req)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

func (h *Handlers) subscriberCRM(w http.ResponseWriter, r *http.Request) error {
	st, err := h.svc.SubscriberCRM(r.Context(), r.PathValue("botID"), r.PathValue("subscriberID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"data": st})
}

func (h *Handlers) subscriberDeals(w http.ResponseWriter, r *http.Request) error {
	ds, err := h.svc.SubscriberDeals(r.Context(), r.PathValue("botID"), r.PathValue("subscriberID"), r.URL.Query().Get("connection_id"))
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"data": ds})
}

func (h *Handlers) syncSubscriber(w http.ResponseWriter, r *http.Request) error {
	var req SubscriberSyncRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	res, err := h.svc.SyncSubscriber(r.Context(), r.PathValue("botID"), r.PathValue("subscriberID"), req)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"data": res})
}

func (h *Handlers) exportNote(w http.ResponseWriter, r *http.Request) error {
	var req NoteRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	n, err := h.svc.ExportNote(r.Context(), r.PathValue("botID"), r.PathValue("subscriberID"), req)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusCreated, n)
}
