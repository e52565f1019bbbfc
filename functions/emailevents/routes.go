package emailevents

import (
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the email event routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the token API's suppression list routes. Suppressing or re-allowing an
// address is a builder's decision about the bot's sending, so it needs the Reactions right.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const sups = "/api/bots/{botID}/email/suppressions"
	mux.Handle("GET "+sups, httpapi.Need("settings:read"), h.list)
	mux.Handle("POST "+sups, httpapi.Need("settings:write", auth.RightReactions), h.importList)
	mux.Handle("DELETE "+sups+"/{address}", httpapi.Need("settings:write", auth.RightReactions), h.delete)
}

// PublicRoutes registers the routes a sent email and the sending providers call, without
// credentials: each is authenticated by what it carries (a signed link token, a provider's
// signature).
func PublicRoutes(mux *httpapi.Mux, svc *Service) {
	h := &Handlers{svc: svc}
	// The open pixel's token ends in ".gif" (a pattern wildcard is a whole segment).
	mux.Handle("GET /e/t/o/{token}", httpapi.PublicSecretPath(), h.open)
	mux.Handle("GET /e/t/c/{token}", httpapi.PublicSecretPath(), h.click)
	mux.Handle("GET /u/{token}", httpapi.PublicSecretPath(), h.unsubscribePage)
	mux.Handle("POST /u/{token}", httpapi.PublicSecretPath(), h.unsubscribe)
	mux.Handle("POST /esp/{provider}/webhook", httpapi.Public(), h.webhook)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	reason := r.URL.Query().Get("reason")
	if reason != "" && !validReason(reason) {
		return httpapi.InvalidParam("reason", "reason must be unsubscribed, bounced or complained")
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Suppression, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), reason, limit, cursor)
	})
}

// importList suppresses the addresses of the body for its reason.
func (h *Handlers) importList(w http.ResponseWriter, r *http.Request) error {
	var req NewSuppressions
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	res, err := h.svc.Import(r.Context(), r.PathValue("botID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

// delete takes the address (URL-escaped in the path: %40 for @ works, as does a plain @)
// off the list; ?expected_revision=N guards against dismissing an event not yet seen.
func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	rev, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("address"), rev); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
