// Package requestlogs serves a bot's request log: every API request made against the bot in
// the last 30 days, newest first.
package requestlogs

import (
	"net/http"
	"regexp"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/reqlog"
)

// Handlers serves the request log.
type Handlers struct {
	log     *reqlog.Log
	cursors *httpapi.Cursors
}

// Routes registers the request-log route.
func Routes(mux *httpapi.Mux, log *reqlog.Log, cursors *httpapi.Cursors) {
	h := &Handlers{log: log, cursors: cursors}
	mux.Handle("GET /api/bots/{botID}/request-logs", httpapi.Need("logs:read", auth.RightAnalytics), h.list)
}

var (
	classRe = regexp.MustCompile(`^[1-5]xx$`)
	// A route template as logged: a method, a space, a path of at most 300 characters.
	routeRe = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE) /[^\s]{0,300}$`)
)

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := reqlog.Filter{StatusClass: q.Get("status"), Route: q.Get("route")}
	if q.Has("status") && !classRe.MatchString(f.StatusClass) {
		return httpapi.InvalidParam("status", "status must be a status class: 2xx, 3xx, 4xx or 5xx")
	}
	if q.Has("route") && !routeRe.MatchString(f.Route) {
		return httpapi.InvalidParam("route", `route must be a route template such as "GET /api/bots/{botID}"`)
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]reqlog.Entry, string, error) {
		return h.log.List(r.Context(), r.PathValue("botID"), f, limit, cursor)
	})
}
