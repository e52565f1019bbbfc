package copilot

import (
	"net/http"

	"github.com/botplatform/api/functions/ai"
	"github.com/botplatform/api/shared/httpapi"
)

// The route paths. They name a reaction or a proposal without its bot: personal access
// tokens only (the kernel refuses bot tokens on routes without {botID}).
const (
	reactionProposals = "/api/reactions/{rootID}/copilot/proposals"
	proposalPath      = "/api/copilot/proposals/{proposalID}"
)

// handlers serves the copilot routes.
type handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the copilot routes. Reads need reactions:read; the others
// reactions:write and, on the reaction's bot, the Reactions right (checked by the service
// once the bot is known); creating one also spends managed AI (the managed_ai plan
// feature). Every one needs the copilot rollout.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &handlers{svc: svc, cursors: cursors}
	mux.Handle("POST "+reactionProposals, createAccess, h.create)
	mux.Handle("GET "+reactionProposals, readAccess, h.list)
	mux.Handle("GET "+proposalPath, readAccess, h.get)
	// Validating and simulating change only the proposal's record of its last outcome; they
	// take a body (simulate) and are POST, audited like every POST.
	mux.Handle("POST "+proposalPath+"/validate", writeAccess, h.validate)
	mux.Handle("POST "+proposalPath+"/simulate", writeAccess, h.simulate)
	mux.Handle("POST "+proposalPath+"/apply", writeAccess, h.apply)
	mux.Handle("POST "+proposalPath+"/reject", writeAccess, h.reject)
}

func (h *handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req CreateRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	pr, replayed, err := h.svc.CreateOnce(r.Context(), httpapi.Caller(r), r.PathValue("rootID"), r.Header.Get("Idempotency-Key"), req)
	if err != nil {
		return err
	}
	if replayed {
		w.Header().Set(ai.ReplayedHeader, "true")
	}
	w.Header().Set("Location", "/api/copilot/proposals/"+pr.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, pr)
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Proposal, string, error) {
		return h.svc.List(r.Context(), httpapi.Caller(r), r.PathValue("rootID"), limit, cursor)
	})
}

func (h *handlers) get(w http.ResponseWriter, r *http.Request) error {
	pr, err := h.svc.Get(r.Context(), httpapi.Caller(r), r.PathValue("proposalID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, pr)
}

func (h *handlers) validate(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	v, err := h.svc.Validate(r.Context(), httpapi.Caller(r), r.PathValue("proposalID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

func (h *handlers) simulate(w http.ResponseWriter, r *http.Request) error {
	var req SimulateRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	sim, err := h.svc.Simulate(r.Context(), httpapi.Caller(r), r.PathValue("proposalID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, sim)
}

// decideRequest is the body of apply and reject: the proposal's revision read, optional.
type decideRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
}

func (h *handlers) apply(w http.ResponseWriter, r *http.Request) error {
	var req decideRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	a, err := h.svc.Apply(r.Context(), httpapi.Caller(r), r.PathValue("proposalID"), req.ExpectedRevision)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, a)
}

func (h *handlers) reject(w http.ResponseWriter, r *http.Request) error {
	var req decideRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	pr, err := h.svc.Reject(r.Context(), httpapi.Caller(r), r.PathValue("proposalID"), req.ExpectedRevision)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, pr)
}
