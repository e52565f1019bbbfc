package emaildomains

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

// Routes registers the token API's sending domain, inbound route and inbound message routes.
// Reading needs access to the bot only; adding, verifying, changing and deleting also need
// the Reactions right (spec 4.3).
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const (
		base    = "/api/bots/{botID}/email"
		domains = base + "/domains"
		domain  = domains + "/{domainID}"
		routes  = base + "/inbound-routes"
		route   = routes + "/{routeID}"
		msgs    = base + "/inbound-messages"
	)
	read := httpapi.Need("settings:read")
	write := httpapi.Need("settings:write", auth.RightReactions)
	mux.Handle("GET "+domains, read, h.listDomains)
	mux.Handle("POST "+domains, write, h.addDomain)
	mux.Handle("GET "+domain, read, h.getDomain)
	mux.Handle("DELETE "+domain, write, h.deleteDomain)
	mux.Handle("POST "+domain+"/verify", write, h.verifyDomain)
	mux.Handle("GET "+routes, read, h.listRoutes)
	mux.Handle("POST "+routes, write, h.createRoute)
	mux.Handle("GET "+route, read, h.getRoute)
	mux.Handle("PATCH "+route, write, h.updateRoute)
	mux.Handle("DELETE "+route, write, h.deleteRoute)
	mux.Handle("GET "+msgs, read, h.listMessages)
	mux.Handle("GET "+msgs+"/{messageID}", read, h.getMessage)
}

// PublicRoutes registers where providers deliver inbound mail, without credentials: each
// provider is authenticated its own way (public.go).
func PublicRoutes(mux *httpapi.Mux, svc *Service) {
	h := &Handlers{svc: svc}
	mux.Handle("POST /esp/{provider}/inbound", httpapi.Public(), h.inbound)
}

func (h *Handlers) listDomains(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Domain, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) addDomain(w http.ResponseWriter, r *http.Request) error {
	var req NewDomain
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	d, err := h.svc.Add(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/email/domains/"+d.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, d)
}

func (h *Handlers) getDomain(w http.ResponseWriter, r *http.Request) error {
	d, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("domainID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Handlers) deleteDomain(w http.ResponseWriter, r *http.Request) error {
	rev, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("domainID"), rev); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *Handlers) verifyDomain(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	d, err := h.svc.Verify(r.Context(), r.PathValue("botID"), r.PathValue("domainID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Handlers) listRoutes(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]InboundRoute, string, error) {
		return h.svc.ListRoutes(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) createRoute(w http.ResponseWriter, r *http.Request) error {
	var req NewRoute
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	rt, err := h.svc.CreateRoute(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/email/inbound-routes/"+rt.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, rt)
}

func (h *Handlers) getRoute(w http.ResponseWriter, r *http.Request) error {
	rt, err := h.svc.GetRoute(r.Context(), r.PathValue("botID"), r.PathValue("routeID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rt)
}

func (h *Handlers) updateRoute(w http.ResponseWriter, r *http.Request) error {
	var req RouteChange
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	rt, err := h.svc.UpdateRoute(r.Context(), r.PathValue("botID"), r.PathValue("routeID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rt)
}

func (h *Handlers) deleteRoute(w http.ResponseWriter, r *http.Request) error {
	rev, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteRoute(r.Context(), r.PathValue("botID"), r.PathValue("routeID"), rev); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *Handlers) listMessages(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]MessageSummary, string, error) {
		return h.svc.ListMessages(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) getMessage(w http.ResponseWriter, r *http.Request) error {
	m, err := h.svc.GetMessage(r.Context(), r.PathValue("botID"), r.PathValue("messageID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, m)
}
