// Package auditlog serves the account's audit trail over REST.
package auditlog

import (
	"net/http"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
)

// Handlers serves the audit trail.
type Handlers struct {
	log     *audit.Log
	cursors *httpapi.Cursors
}

// Routes registers the audit routes.
func Routes(mux *httpapi.Mux, log *audit.Log, cursors *httpapi.Cursors) {
	h := &Handlers{log: log, cursors: cursors}
	mux.Handle("GET /api/audit-events", httpapi.NeedPAT("audit:read"), h.list)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	p := httpapi.Caller(r)
	// The trail shows every member's actions, so like an organization's audit log it is
	// for owners only; members read their own tokens' use in their token list.
	if p.Role != auth.RoleOwner {
		return httpapi.E(httpapi.KindForbidden, "owner_required", "only account owners can read the audit trail")
	}
	bot := r.URL.Query().Get("bot_id")
	if bot != "" && !ids.Valid("bot", bot) {
		return httpapi.InvalidParam("bot_id", "bot_id must be a bot id such as bot_...")
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]audit.Event, string, error) {
		return h.log.List(r.Context(), p.AccountID, bot, limit, cursor)
	})
}
