package experiments

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the experiment routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Access of the routes: every one needs the bot's Analytics right and the analytics plan
// feature. Assignment records an exposure, which changes the reports, so it needs the write
// scope; a report changes nothing but is a POST (it takes a body) and so is audited.
var (
	readAccess  = httpapi.Need("experiments:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	writeAccess = httpapi.Need("experiments:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	// cohortAccess saves a segment as well (spec 4.7).
	cohortAccess = httpapi.Need("experiments:read", auth.RightAnalytics).AndScope("segments:write").InPlan(auth.FeatureAnalytics)
)

// Routes registers the experiment routes.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const (
		exps = "/api/bots/{botID}/experiments"
		exp  = exps + "/{experimentID}"
	)
	mux.Handle("GET "+exps, readAccess, h.list)
	mux.Handle("POST "+exps, writeAccess, h.create)
	mux.Handle("GET "+exp, readAccess, h.get)
	mux.Handle("PATCH "+exp, writeAccess, h.update)
	mux.Handle("DELETE "+exp, writeAccess, h.delete)
	for _, a := range []Action{ActionStart, ActionPause, ActionResume, ActionComplete} {
		mux.Handle("POST "+exp+"/"+string(a), writeAccess, h.transition(a))
	}
	mux.Handle("POST "+exp+"/winner", writeAccess, h.winner)
	mux.Handle("GET "+exp+"/versions", readAccess, h.versions)
	mux.Handle("GET "+exp+"/versions/{version}", readAccess, h.version)
	mux.Handle("POST "+exp+"/assignments", writeAccess, h.assign)
	mux.Handle("POST "+exp+"/report", readAccess, h.report)
	mux.Handle("POST "+exp+"/cohorts", cohortAccess, h.cohort)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	status := Status(r.URL.Query().Get("status"))
	if status != "" && !slices.Contains(Statuses(), status) {
		return httpapi.InvalidParam("status", "status must be draft, running, paused or completed")
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Experiment, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), status, limit, cursor)
	})
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req NewExperiment
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	e, err := h.svc.Create(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/experiments/"+e.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, e)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	e, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, e)
}

// patchRequest is a PATCH body: the revision read and the members to change.
type patchRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
	Patch
}

// Validate checks what decoding cannot.
func (v *patchRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(v.ExpectedRevision)
	return p.Err()
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req patchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	e, err := h.svc.Update(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), *req.ExpectedRevision, req.Patch)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, e)
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	rev, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), rev); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

// revisionRequest is the body of a transition.
type revisionRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (v *revisionRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(v.ExpectedRevision)
	return p.Err()
}

func (h *Handlers) transition(a Action) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req revisionRequest
		if err := httpapi.Decode(w, r, &req); err != nil {
			return err
		}
		e, err := h.svc.Transition(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), *req.ExpectedRevision, a)
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, http.StatusOK, e)
	}
}

// winnerRequest is the body of winner.
type winnerRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
	VariantID        string `json:"variant_id"`
}

// Validate checks what decoding cannot.
func (v *winnerRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(v.ExpectedRevision)
	if v.VariantID == "" {
		p.Add("variant_id", "is required: the id of the winning variant")
	}
	return p.Err()
}

func (h *Handlers) winner(w http.ResponseWriter, r *http.Request) error {
	var req winnerRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	e, err := h.svc.Winner(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), *req.ExpectedRevision, req.VariantID)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, e)
}

func (h *Handlers) versions(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Version, string, error) {
		return h.svc.Versions(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), limit, cursor)
	})
}

func (h *Handlers) version(w http.ResponseWriter, r *http.Request) error {
	// A version that cannot be a number is not in the bot either.
	n, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil {
		n = 0
	}
	v, err := h.svc.Version(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), n)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

// assignRequest is the body of an assignment.
type assignRequest struct {
	SubscriberID string `json:"subscriber_id"`
}

// Validate checks what decoding cannot.
func (v *assignRequest) Validate() error {
	var p httpapi.Problems
	p.Require("subscriber_id", v.SubscriberID)
	return p.Err()
}

func (h *Handlers) assign(w http.ResponseWriter, r *http.Request) error {
	var req assignRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	a, err := h.svc.Assign(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), req.SubscriberID)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, a)
}

func (h *Handlers) report(w http.ResponseWriter, r *http.Request) error {
	var req ReportRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	rep, err := h.svc.Report(r.Context(), r.PathValue("botID"), r.PathValue("experimentID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}

func (h *Handlers) cohort(w http.ResponseWriter, r *http.Request) error {
	var req CohortRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	seg, err := h.svc.SaveCohort(r.Context(), bot, r.PathValue("experimentID"), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/segments/"+seg.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, seg.JSON)
}
