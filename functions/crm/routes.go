package crm

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
)

// CallbackRoute is the OAuth providers' redirect target (public: only the state
// authenticates it).
const CallbackRoute = "GET /api/integrations/crm/{provider}/callback"

// Handlers serves the family's routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the CRM connection routes (spec 4.2): crm:read or crm:write, the
// Reactions right and the crm plan feature on every bot route; the callback is public.
// The spec's provider placeholders are literal path segments: hubspot and salesforce
// ({oauth_provider}), pipedrive ({key_provider}), dynamics ({oidc_provider}).
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const base = "/api/bots/{botID}/crm/connections"
	read := httpapi.Need("crm:read", auth.RightReactions).InPlan(auth.FeatureCRM)
	write := httpapi.Need("crm:write", auth.RightReactions).InPlan(auth.FeatureCRM)
	mux.Handle("GET "+base, read, h.list)
	mux.Handle("GET "+base+"/{connectionID}", read, h.get)
	mux.Handle("DELETE "+base+"/{connectionID}", write, h.delete)
	mux.Handle("POST "+base+"/"+crmapi.HubSpot+"/start", write, h.start(crmapi.HubSpot))
	mux.Handle("POST "+base+"/"+crmapi.Salesforce+"/start", write, h.start(crmapi.Salesforce))
	mux.Handle("POST "+base+"/"+crmapi.Pipedrive, write, h.pipedrive)
	mux.Handle("POST "+base+"/"+crmapi.Dynamics, write, h.dynamics)
	mux.Handle(CallbackRoute, httpapi.Public(), h.callback)
	h.mappingRoutes(mux, base+"/{connectionID}", read, write)
	h.syncRoutes(mux, base+"/{connectionID}", read, write)
	SubscriberRoutes(mux, h)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Connection, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	c, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("connectionID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *Handlers) start(provider string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req StartRequest
		if err := httpapi.Decode(w, r, &req); err != nil {
			return err
		}
		st, err := h.svc.Start(r.Context(), httpapi.Caller(r), r.PathValue("botID"), provider, req)
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		return httpapi.WriteJSON(w, http.StatusOK, st)
	}
}

func (h *Handlers) pipedrive(w http.ResponseWriter, r *http.Request) error {
	var req PipedriveRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	c, created, err := h.svc.ConnectPipedrive(r.Context(), r.PathValue("botID"), req)
	return h.connected(w, c, created, err)
}

func (h *Handlers) dynamics(w http.ResponseWriter, r *http.Request) error {
	var req DynamicsRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	c, created, err := h.svc.ConnectDynamics(r.Context(), r.PathValue("botID"), req)
	return h.connected(w, c, created, err)
}

// connected answers a connect: 201 with Location for a new connection, 200 for a
// reconnected one.
func (h *Handlers) connected(w http.ResponseWriter, c Connection, created bool, err error) error {
	if err != nil {
		return retryAfter(w, err)
	}
	if created {
		w.Header().Set("Location", "/api/bots/"+c.BotID+"/crm/connections/"+c.ID)
		return httpapi.WriteJSON(w, http.StatusCreated, c)
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

// callback serves the providers' redirect. The kernel audits authenticated routes only;
// this one acts for the start's caller, so it publishes their audit event itself.
func (h *Handlers) callback(w http.ResponseWriter, r *http.Request) error {
	provider := r.PathValue("provider")
	if kind, ok := crmapi.Kind(provider); !ok || kind != crmapi.AuthOAuth {
		return httpapi.E(httpapi.KindNotFound, "not_found", "no such route")
	}
	// The URL carries the code and the state: no cache keeps the answer, no page it leads
	// to learns the URL.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	start := h.svc.now()
	c, created, actor, err := h.svc.Callback(r.Context(), provider, r.URL.Query())
	status := http.StatusOK
	switch {
	case err != nil:
		status = httpapi.AsError(err).Status()
	case created:
		status = http.StatusCreated
	}
	if actor != nil {
		httpapi.PublishAudit(r.Context(), h.svc.audit, h.svc.log, httpapi.Audited{Principal: actor.Principal, Method: http.MethodGet,
			Route: CallbackRoute, Bot: actor.BotID, Status: status, Start: start, RequestID: httpapi.RequestID(r.Context())})
	}
	return h.connected(w, c, created, err)
}

// retryAfter sets Retry-After from a problem that knows how long the provider asked to wait.
func retryAfter(w http.ResponseWriter, err error) error {
	var d *delayed
	if errors.As(err, &d) && d.after > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.after.Seconds()))))
	}
	return err
}
