package flowintel

import (
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Base is the path of the family's routes.
const Base = "/api/bots/{botID}/flow-intelligence"

// Access of the family: reads need analytics:read and writes analytics:write, with the bot's
// Analytics right, and every route the account's flow_intelligence rollout (403
// feature_not_enabled without it). The policy is the account's, so changing it takes more
// than a bot: a personal access token (policyAccess) whose user holds the Analytics right on
// every bot (accountWide).
var (
	readAccess   = httpapi.Need("analytics:read", auth.RightAnalytics).InRollout(auth.RolloutFlowIntelligence)
	writeAccess  = httpapi.Need("analytics:write", auth.RightAnalytics).InRollout(auth.RolloutFlowIntelligence)
	policyAccess = httpapi.NeedPAT("analytics:write", auth.RightAnalytics).InRollout(auth.RolloutFlowIntelligence)
)

type handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the flow intelligence routes.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &handlers{svc: svc, cursors: cursors}
	mux.Handle("GET "+Base+"/reactions/{reactionID}/overlay", readAccess, h.overlay)
	mux.Handle("GET "+Base+"/reactions/{reactionID}/samples", readAccess, h.samples)
	mux.Handle("GET "+Base+"/policy", readAccess, h.policy)
	mux.Handle("PUT "+Base+"/policy", policyAccess, h.setPolicy)
	mux.Handle("POST "+Base+"/reaggregations", writeAccess, h.start)
	mux.Handle("GET "+Base+"/reaggregations", readAccess, h.jobs)
	mux.Handle("GET "+Base+"/reaggregations/{jobID}", readAccess, h.job)
}

func (h *handlers) overlay(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	v, err := parseVersion(q.Get("version"))
	if err != nil {
		return err
	}
	rg, err := parseRange(q, h.svc.now())
	if err != nil {
		return err
	}
	o, err := h.svc.Overlay(r.Context(), r.PathValue("botID"), r.PathValue("reactionID"), v, rg)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, o)
}

func (h *handlers) samples(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	step := q.Get("step_id")
	if step == "" {
		return httpapi.InvalidParam("step_id", "step_id is required: the step whose runs to show")
	}
	v, err := parseVersion(q.Get("version"))
	if err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	out, err := h.svc.Samples(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("botID"), r.PathValue("reactionID"), step, v, limit)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *handlers) policy(w http.ResponseWriter, r *http.Request) error {
	p, err := h.svc.Policy(r.Context(), httpapi.Caller(r).AccountID)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

func (h *handlers) setPolicy(w http.ResponseWriter, r *http.Request) error {
	if err := accountWide(httpapi.Caller(r)); err != nil {
		return err
	}
	var req PolicyRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	p, err := h.svc.SetPolicy(r.Context(), httpapi.Caller(r).AccountID, req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

func (h *handlers) start(w http.ResponseWriter, r *http.Request) error {
	var req ReaggregationRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	j, err := h.svc.StartReaggregation(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/flow-intelligence/reaggregations/"+j.ID)
	return httpapi.WriteJSON(w, http.StatusAccepted, j)
}

func (h *handlers) jobs(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Job, string, error) {
		return h.svc.Reaggregations(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *handlers) job(w http.ResponseWriter, r *http.Request) error {
	j, err := h.svc.Reaggregation(r.Context(), r.PathValue("botID"), r.PathValue("jobID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, j)
}

// accountWide refuses a caller who could change the account's policy through one bot
// without a say over the others: a member whose Analytics right is granted on single bots.
// Owners, and members holding the right on every bot, may.
func accountWide(p *auth.Principal) error {
	if p.Role == auth.RoleOwner || p.Rights.Has(auth.RightAnalytics) {
		return nil
	}
	return httpapi.E(httpapi.KindForbidden, "missing_right",
		"the flow intelligence policy is the account's: changing it needs the analytics right on every bot, not on this bot alone").
		With("missing_rights", []auth.Right{auth.RightAnalytics})
}
