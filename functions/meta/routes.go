package meta

import (
	"net/http"

	"github.com/botplatform/api/shared/httpapi"
)

// CallbackRoute is the Facebook Login dialog's redirect target (public: only the state
// authenticates it).
const CallbackRoute = "GET /api/meta/callback"

// The access of the routes: account-level, personal access tokens only. Attaching also
// needs bots:write (and, on the target bot, the Reactions right: attachAccess), what
// connecting a channel needs.
var (
	readAccess   = httpapi.NeedPAT("integrations:read")
	writeAccess  = httpapi.NeedPAT("integrations:write")
	attachRoute  = httpapi.NeedPAT("integrations:write").AndScope("bots:write")
	connectionsP = "/api/meta/connections"
	connectionP  = connectionsP + "/{connectionID}"
)

// handlers serves the family's routes.
type handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the Meta connection routes and the public callback.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &handlers{svc: svc, cursors: cursors}
	mux.Handle("POST "+connectionsP, writeAccess, h.start)
	mux.Handle("GET "+connectionsP, readAccess, h.list)
	mux.Handle("GET "+connectionP, readAccess, h.get)
	mux.Handle("DELETE "+connectionP, writeAccess, h.delete)
	mux.Handle("GET "+connectionP+"/assets", readAccess, h.assets)
	mux.Handle("POST "+connectionP+"/check", writeAccess, h.check)
	mux.Handle("PUT "+connectionP+"/selection", writeAccess, h.selection)
	mux.Handle("POST "+connectionP+"/attachments", attachRoute, h.attach)
	mux.Handle(CallbackRoute, httpapi.Public(), h.callback)
}

func (h *handlers) start(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	st, err := h.svc.Start(r.Context(), httpapi.Caller(r))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", connectionsP+"/"+st.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, st)
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Connection, string, error) {
		return h.svc.List(r.Context(), httpapi.Caller(r).AccountID, limit, cursor)
	})
}

func (h *handlers) get(w http.ResponseWriter, r *http.Request) error {
	c, err := h.svc.Get(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("connectionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

func (h *handlers) delete(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.Delete(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("connectionID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *handlers) assets(w http.ResponseWriter, r *http.Request) error {
	a, err := h.svc.GetAssets(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("connectionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, a)
}

func (h *handlers) check(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	c, err := h.svc.Check(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("connectionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

func (h *handlers) selection(w http.ResponseWriter, r *http.Request) error {
	var req SelectionRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	a, err := h.svc.Select(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("connectionID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, a)
}

func (h *handlers) attach(w http.ResponseWriter, r *http.Request) error {
	var req AttachRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	ch, err := h.svc.Attach(r.Context(), httpapi.Caller(r), r.PathValue("connectionID"), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+ch.BotID+"/channels/"+ch.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, ch)
}

// callback serves the dialog's redirect. The kernel audits authenticated routes only; this
// one acts for the start's caller, so it publishes their audit event itself. The URL holds
// the code and the state: no cache keeps the answer, no page it leads to learns the URL, and
// neither the request log nor the process log records a query. Success is 200 whether the
// start's connection became active or the user's existing connection was updated in its
// place (the start's 201 made the resource; the callback never creates one): the answer is
// the connection, and Content-Location its URL, which is not the start's when it was a
// reconnection.
func (h *handlers) callback(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	start := h.svc.now()
	c, actor, err := h.svc.Callback(r.Context(), r.URL.Query())
	status := http.StatusOK
	if err != nil {
		status = httpapi.AsError(err).Status()
	}
	if actor != nil {
		httpapi.PublishAudit(r.Context(), h.svc.audit, h.svc.log, httpapi.Audited{Principal: actor.Principal, Method: http.MethodGet,
			Route: CallbackRoute, Status: status, Start: start, RequestID: httpapi.RequestID(r.Context())})
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Location", connectionsP+"/"+c.ID)
	return httpapi.WriteJSON(w, http.StatusOK, c)
}
