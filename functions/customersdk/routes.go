package customersdk

import (
	"net/http"
	"strconv"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the customer SDK management routes.
type Handlers struct{ svc *Service }

// Routes registers the token API's customer SDK routes (spec 4.5): reads need
// customer_sdk:read and the Analytics right, writes customer_sdk:write and the Reactions
// right; both need the customer_sdk plan feature (402 feature_not_in_plan without it).
func Routes(mux *httpapi.Mux, svc *Service) {
	h := &Handlers{svc: svc}
	const base = "/api/bots/{botID}/customer-sdk"
	read := httpapi.Need("customer_sdk:read", auth.RightAnalytics).InPlan(auth.FeatureCustomerSDK)
	write := httpapi.Need("customer_sdk:write", auth.RightReactions).InPlan(auth.FeatureCustomerSDK)
	mux.Handle("GET "+base, read, h.get)
	mux.Handle("PATCH "+base, write, h.update)
	mux.Handle("POST "+base+"/enable", write, h.enable)
	mux.Handle("POST "+base+"/rotate-secret", write, h.rotate)
	mux.Handle("GET "+base+"/installations", read, h.installations)
	mux.Handle("DELETE "+base+"/installations/{installationID}", write, h.revoke)
	mux.Handle("GET "+base+"/report", read, h.report)
}

// withSecret is a project with its identity secret, shown once (enable, rotate-secret).
type withSecret struct {
	Project
	IdentitySecret string `json:"identity_secret"`
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	p, err := h.svc.Project(r.Context(), r.PathValue("botID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

// enableRequest is the body of enable: the allowlists, all optional.
type enableRequest struct {
	WebOrigins      *[]string `json:"web_origins"`
	IOSBundleIDs    *[]string `json:"ios_bundle_ids"`
	AndroidPackages *[]string `json:"android_packages"`
}

func (e *enableRequest) settings() Settings {
	return Settings{WebOrigins: e.WebOrigins, IOSBundleIDs: e.IOSBundleIDs, AndroidPackages: e.AndroidPackages}
}

// Validate checks the allowlists.
func (e *enableRequest) Validate() error {
	s := e.settings()
	return s.Validate()
}

func (h *Handlers) enable(w http.ResponseWriter, r *http.Request) error {
	if !h.svc.configured() {
		return errNotConfigured() // before reading the body: nothing else can help
	}
	var req enableRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	p, secret, created, err := h.svc.Enable(r.Context(), bot, req.settings())
	if err != nil {
		return err
	}
	if created {
		w.Header().Set("Location", "/api/bots/"+bot+"/customer-sdk")
		w.Header().Set("Cache-Control", "no-store")
		return httpapi.WriteJSON(w, http.StatusCreated, withSecret{Project: p, IdentitySecret: secret})
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

// patchRequest is a PATCH body.
type patchRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
	Settings
}

// Validate checks what decoding cannot.
func (v *patchRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(v.ExpectedRevision)
	v.check(&p)
	return p.Err()
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req patchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	p, err := h.svc.Update(r.Context(), r.PathValue("botID"), *req.ExpectedRevision, req.Settings)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

// rotateRequest is the optional body of rotate-secret.
type rotateRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
}

func (h *Handlers) rotate(w http.ResponseWriter, r *http.Request) error {
	var req rotateRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	p, secret, err := h.svc.RotateSecret(r.Context(), r.PathValue("botID"), req.ExpectedRevision)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return httpapi.WriteJSON(w, http.StatusOK, withSecret{Project: p, IdentitySecret: secret})
}

// installationList is the installations answer: the list shape, never a next page (the
// list is the most recent ones only, spec 8).
type installationList struct {
	Data       []Installation `json:"data"`
	NextCursor *string        `json:"next_cursor"`
}

func (h *Handlers) installations(w http.ResponseWriter, r *http.Request) error {
	limit := MaxInstallationsListed
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxInstallationsListed {
			return httpapi.InvalidParam("limit", "limit must be an integer from 1 to 200")
		}
		limit = n
	}
	bot := r.PathValue("botID")
	if _, err := h.svc.Project(r.Context(), bot); err != nil {
		return err
	}
	list, err := h.svc.Installations(r.Context(), bot, limit)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, installationList{Data: list})
}

func (h *Handlers) revoke(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.RevokeInstallation(r.Context(), r.PathValue("botID"), r.PathValue("installationID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *Handlers) report(w http.ResponseWriter, r *http.Request) error {
	bot := r.PathValue("botID")
	if _, err := h.svc.Project(r.Context(), bot); err != nil {
		return err
	}
	c, err := h.svc.Counts(r.Context(), bot)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}
