package funnels

import (
	"encoding/json"
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the funnel routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the funnel routes. Every one needs the bot's Analytics right and the
// analytics plan feature; saving a cohort also needs segments:write, since it makes a
// segment.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const (
		funnels = "/api/bots/{botID}/funnels"
		funnel  = funnels + "/{funnelID}"
	)
	read := httpapi.Need("analytics:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	write := httpapi.Need("analytics:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	mux.Handle("GET "+funnels, read, h.list)
	mux.Handle("POST "+funnels, write, h.create)
	// Reports take a body and so are POST, audited like every POST; reading is enough.
	mux.Handle("POST "+funnels+"/query", read, h.query)
	mux.Handle("GET "+funnel, read, h.get)
	mux.Handle("PATCH "+funnel, write, h.update)
	mux.Handle("DELETE "+funnel, write, h.delete)
	mux.Handle("POST "+funnel+"/report", read, h.report)
	mux.Handle("POST "+funnel+"/cohorts", read.AndScope("segments:write"), h.cohort)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Funnel, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var d Definition
	if err := httpapi.Decode(w, r, &d); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	f, err := h.svc.Create(r.Context(), bot, d)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/funnels/"+f.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, f)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	f, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("funnelID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, f)
}

// patchRequest is a PATCH body: the revision read and the members to change.
type patchRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
	Definition
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
	f, err := h.svc.Update(r.Context(), r.PathValue("botID"), r.PathValue("funnelID"), *req.ExpectedRevision, req.Definition)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, f)
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	rev, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("funnelID"), rev); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

// reportRequest is the body of POST .../report.
type reportRequest struct {
	From      *string `json:"from"`
	To        *string `json:"to"`
	Breakdown *string `json:"breakdown"`
}

// read records the problems of the range and the breakdown in p; a range over MaxRange is
// the error.
func (v *reportRequest) read(p *httpapi.Problems) (Range, bool, error) {
	rg, err := parseRange(p, v.From, v.To)
	if v.Breakdown != nil && *v.Breakdown != BreakdownChannel {
		p.Add("breakdown", "must be %q or left out", BreakdownChannel)
	}
	return rg, v.Breakdown != nil, err
}

func (h *Handlers) report(w http.ResponseWriter, r *http.Request) error {
	var req reportRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	var p httpapi.Problems
	rg, breakdown, err := req.read(&p)
	if err != nil {
		return err
	}
	if err := p.Err(); err != nil {
		return err
	}
	rep, err := h.svc.Report(r.Context(), r.PathValue("botID"), r.PathValue("funnelID"), rg, breakdown)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}

// queryRequest is the body of POST .../funnels/query: an unsaved funnel's steps and window
// and a report's range.
type queryRequest struct {
	Steps            *[]Step         `json:"steps"`
	ConversionWindow json.RawMessage `json:"conversion_window"`
	reportRequest
}

func (h *Handlers) query(w http.ResponseWriter, r *http.Request) error {
	var req queryRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	var f Funnel
	p := applyDefinition(&f, req.Steps, req.ConversionWindow, true)
	rg, breakdown, err := req.read(&p)
	if err != nil {
		return err
	}
	if err := p.Err(); err != nil {
		return err
	}
	rep, err := h.svc.Query(r.Context(), r.PathValue("botID"), f.Steps, f.Window(), rg, breakdown)
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
	seg, id, err := h.svc.Cohort(r.Context(), bot, r.PathValue("funnelID"), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/segments/"+id)
	return httpapi.WriteJSON(w, http.StatusCreated, seg)
}
