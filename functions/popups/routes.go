package popups

import (
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the popup routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the token API's popup routes. Every one needs the Reactions right (spec
// 4.3), reads included, and the popups plan feature.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const (
		pops = "/api/bots/{botID}/popups"
		pop  = pops + "/{popupID}"
	)
	read := httpapi.Need("popups:read", auth.RightReactions).InPlan(auth.FeaturePopups)
	write := httpapi.Need("popups:write", auth.RightReactions).InPlan(auth.FeaturePopups)
	mux.Handle("GET "+pops, read, h.list)
	mux.Handle("POST "+pops, write, h.create)
	// preflight changes nothing but is POST (it takes a body) and so audited, like
	// content's validate; reading is enough to ask it.
	mux.Handle("POST "+pops+"/preflight", read, h.preflight)
	mux.Handle("GET "+pop, read, h.get)
	mux.Handle("PATCH "+pop, write, h.update)
	mux.Handle("DELETE "+pop, write, h.delete)
	mux.Handle("GET "+pop+"/stats", read, h.stats)
	mux.Handle("GET "+pop+"/experiment", read, h.experiment)
}

// PublicRoutes registers the routes websites call, without credentials: the embeddable
// script and the events it posts (with their CORS preflight).
func PublicRoutes(mux *httpapi.Mux, svc *Service) {
	h := &Handlers{svc: svc}
	mux.Handle("GET /p/{botID}/popups.js", httpapi.Public(), h.script)
	mux.Handle("OPTIONS /p/{botID}/events", httpapi.Public(), h.eventsPreflight)
	mux.Handle("POST /p/{botID}/events", httpapi.Public(), h.event)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	var status Status
	switch s := Status(r.URL.Query().Get("status")); s {
	case "":
	case StatusActive, StatusPaused:
		status = s
	default:
		return httpapi.InvalidParam("status", "status must be active or paused")
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Popup, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), status, limit, cursor)
	})
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var d Definition
	if err := httpapi.Decode(w, r, &d); err != nil {
		return err
	}
	defaultTimezone(r, &d)
	bot := r.PathValue("botID")
	p, err := h.svc.Create(r.Context(), bot, d)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/popups/"+p.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, p)
}

func (h *Handlers) preflight(w http.ResponseWriter, r *http.Request) error {
	var d Definition
	if err := httpapi.Decode(w, r, &d); err != nil {
		return err
	}
	defaultTimezone(r, &d)
	res, err := h.svc.Preflight(r.Context(), r.PathValue("botID"), d)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

// zoned is what the kernel's tenancy check loaded for the request's bot (bots.Bot): its time
// zone is the default of a schedule's.
type zoned interface{ TimeZone() string }

// defaultTimezone gives a schedule without a time zone the bot's.
func defaultTimezone(r *http.Request, d *Definition) {
	if d.Schedule == nil || d.Schedule.Timezone != "" {
		return
	}
	if b, ok := httpapi.LoadedBot(r.Context()).(zoned); ok {
		d.Schedule.Timezone = b.TimeZone()
	}
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	p, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("popupID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
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
	defaultTimezone(r, &req.Definition)
	p, err := h.svc.Update(r.Context(), r.PathValue("botID"), r.PathValue("popupID"), *req.ExpectedRevision, req.Definition)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	rev, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("popupID"), rev); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

func (h *Handlers) stats(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	st, err := h.svc.Stats(r.Context(), r.PathValue("botID"), r.PathValue("popupID"), q.Get("from"), q.Get("to"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, st)
}

func (h *Handlers) experiment(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	res, err := h.svc.Experiment(r.Context(), r.PathValue("botID"), r.PathValue("popupID"), q.Get("from"), q.Get("to"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

func (h *Handlers) script(w http.ResponseWriter, r *http.Request) error {
	b, err := h.svc.Script(r.Context(), r.PathValue("botID"))
	if err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/javascript; charset=utf-8")
	// Short: an edit reaches the websites within a minute, and a popular page still costs
	// one query a minute per cache.
	hd.Set("Cache-Control", "public, max-age=60")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

// allow lets the pages of the request's origin, which is allowed, read the answer. The
// header is echoed as sent (browsers compare it byte for byte), which canonicalOrigin has
// held to one line of plain text.
func allow(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
}

func (h *Handlers) eventsPreflight(w http.ResponseWriter, r *http.Request) error {
	w.Header().Add("Vary", "Origin")
	_, ok, err := h.svc.AllowedOrigin(r.Context(), r.PathValue("botID"), r.Header.Get("Origin"))
	if err != nil {
		return err
	}
	if !ok {
		return errOrigin()
	}
	allow(w, r)
	hd := w.Header()
	hd.Set("Access-Control-Allow-Methods", "POST")
	hd.Set("Access-Control-Allow-Headers", "Content-Type")
	hd.Set("Access-Control-Max-Age", "600")
	return httpapi.NoContent(w)
}

func (h *Handlers) event(w http.ResponseWriter, r *http.Request) error {
	w.Header().Add("Vary", "Origin")
	bot := r.PathValue("botID")
	origin, err := h.svc.Origin(r.Context(), bot, r.Header.Get("Origin"))
	if err != nil {
		return err
	}
	// From here on every answer, errors included, is readable by the allowed page, and so
	// is a 429's Retry-After.
	allow(w, r)
	w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
	var e Event
	if err := httpapi.Decode(w, r, &e); err != nil {
		return err
	}
	if err := h.svc.Ingest(r.Context(), bot, origin, e); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
