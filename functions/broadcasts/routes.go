package broadcasts

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the broadcast routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the broadcast routes of both generations. Every one needs broadcasts:write
// (reads included, spec 4.6), the Reactions right and the broadcasts plan feature; the legacy
// route also needs paid broadcasts enabled for the bot when its body says paid: true.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	register(mux, &Handlers{svc: svc, cursors: cursors})
}

// Unavailable registers the same routes in a process that cannot send broadcasts: each
// answers 503 saying why, after the access checks.
func Unavailable(mux *httpapi.Mux, reason string) {
	register(unavailableMux{mux, reason}, &Handlers{})
}

type router interface {
	Handle(pattern string, access httpapi.Access, h httpapi.HandlerFunc)
}

type unavailableMux struct {
	mux    *httpapi.Mux
	reason string
}

func (u unavailableMux) Handle(pattern string, access httpapi.Access, _ httpapi.HandlerFunc) {
	u.mux.Handle(pattern, access, func(http.ResponseWriter, *http.Request) error {
		return httpapi.Errorf(httpapi.KindUnavailable, "broadcasts_unavailable", "this deployment cannot send broadcasts: %s", u.reason)
	})
}

func register(mux router, h *Handlers) {
	const (
		list = "/api/bots/{botID}/broadcasts"
		one  = list + "/{broadcastID}"
	)
	access := httpapi.Need("broadcasts:write", auth.RightReactions).InPlan(auth.FeatureBroadcasts)
	mux.Handle("GET "+list, access, h.list)
	mux.Handle("POST "+list, access, h.create)
	mux.Handle("GET "+one, access, h.get)
	mux.Handle("PATCH "+one, access, h.update)
	mux.Handle("POST "+one+"/preflight", access, h.preflight)
	mux.Handle("POST "+one+"/schedule", access, h.schedule)
	mux.Handle("POST "+one+"/test-send", access, h.testSend)
	mux.Handle("POST "+one+"/archive", access, h.archive)
	mux.Handle("GET "+one+"/report", access, h.report)
	mux.Handle("GET "+one+"/recipients", access, h.recipients)
	mux.Handle("POST "+one+"/pause", access, h.act("pause"))
	mux.Handle("POST "+one+"/resume", access, h.act("resume"))
	mux.Handle("POST "+one+"/cancel", access, h.act("cancel"))
	mux.Handle("POST /api/bots/{botID}/reactions/{reactionID}/broadcast", access, h.legacy)
	mux.Handle("GET "+emaillinks.BroadcastClickPrefix+"{token}", httpapi.PublicSecretPath(), h.click)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	archived := false
	if v := r.URL.Query().Get("archived"); v != "" || r.URL.Query().Has("archived") {
		b, err := strconv.ParseBool(v)
		if err != nil || (v != "true" && v != "false") {
			return httpapi.InvalidParam("archived", "archived must be true or false")
		}
		archived = b
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Broadcast, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), archived, limit, cursor)
	})
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req Definition
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	b, err := h.svc.Create(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/broadcasts/"+b.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, b)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	b, err := h.svc.Lookup(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, b)
}

type patchRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
	Definition
}

// Validate checks what decoding cannot.
func (v *patchRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(v.ExpectedRevision)
	if v.Name == nil && v.Content == nil && v.Audience == nil && v.Channels == nil && v.WhatsAppTemplate == nil {
		p.Add("name", "give name, content, audience, channels, whatsapp_template or several")
	}
	return p.Err()
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req patchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	b, err := h.svc.Update(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"), *req.ExpectedRevision, req.Definition)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, b)
}

func (h *Handlers) preflight(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	pf, err := h.svc.Preflight(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, pf)
}

// scheduleRequest is schedule's body. send_at is RFC 3339 in UTC.
type scheduleRequest struct {
	ExpectedRevision *int64  `json:"expected_revision"`
	Confirm          *bool   `json:"confirm"`
	SendAt           *string `json:"send_at"`
	sendAt           *time.Time
}

// Validate checks confirm first (its own code), then the rest.
func (v *scheduleRequest) Validate() error {
	if v.Confirm == nil || !*v.Confirm {
		return httpapi.E(httpapi.KindInvalid, "confirmation_required", "launching sends messages to real people: send confirm: true").
			With("field", "confirm")
	}
	var p httpapi.Problems
	p.RequireRevision(v.ExpectedRevision)
	if v.SendAt != nil {
		t, err := time.Parse(time.RFC3339, *v.SendAt)
		switch {
		case err != nil:
			p.Add("send_at", "must be an RFC 3339 time in UTC, such as 2026-05-01T09:00:00Z")
		case func() bool { _, off := t.Zone(); return off != 0 }():
			p.Add("send_at", "must be in UTC (end in Z)")
		default:
			v.sendAt = &t
		}
	}
	return p.Err()
}

func (h *Handlers) schedule(w http.ResponseWriter, r *http.Request) error {
	var req scheduleRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	b, err := h.svc.Schedule(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"), *req.ExpectedRevision, req.sendAt)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, b)
}

type testSendRequest struct {
	SubscriberID *string `json:"subscriber_id"`
}

// Validate checks what decoding cannot.
func (v *testSendRequest) Validate() error {
	var p httpapi.Problems
	if v.SubscriberID == nil || *v.SubscriberID == "" {
		p.Add("subscriber_id", "is required: a subscriber carrying the %q label", TesterLabel)
	} else {
		checkID(&p, "subscriber_id", *v.SubscriberID)
	}
	return p.Err()
}

func (h *Handlers) testSend(w http.ResponseWriter, r *http.Request) error {
	var req testSendRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	res, err := h.svc.TestSend(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"), *req.SubscriberID)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

type revisionRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (v *revisionRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(v.ExpectedRevision)
	return p.Err()
}

func (h *Handlers) archive(w http.ResponseWriter, r *http.Request) error {
	var req revisionRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	b, err := h.svc.Archive(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"), *req.ExpectedRevision)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, b)
}

func (h *Handlers) report(w http.ResponseWriter, r *http.Request) error {
	rep, err := h.svc.Report(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}

func (h *Handlers) recipients(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Recipient, string, error) {
		return h.svc.Recipients(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"), limit, cursor)
	})
}

// act serves the shared pause, resume and cancel: the body is read whole (capped), and
// decoded strictly only when the id is a second-generation broadcast's.
func (h *Handlers) act(action string) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
		if err != nil {
			return httpapi.E(httpapi.KindTooLarge, "body_too_large", "the body is larger than 1 MiB")
		}
		out, err := h.svc.Act(r.Context(), r.PathValue("botID"), r.PathValue("broadcastID"), action, func() (int64, error) {
			var req revisionRequest
			if len(body) == 0 {
				return 0, req.Validate()
			}
			if err := httpapi.DecodeJSON(body, &req, ""); err != nil {
				return 0, err
			}
			return *req.ExpectedRevision, nil
		})
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, http.StatusOK, out)
	}
}

func (h *Handlers) legacy(w http.ResponseWriter, r *http.Request) error {
	var req LegacyRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	paid := req.Paid != nil && *req.Paid
	if p := httpapi.Caller(r); paid && (p == nil || !p.Entitlements.PaidBroadcasts(bot)) {
		return httpapi.E(httpapi.KindForbidden, "paid_broadcasts_not_enabled", "paid broadcasts are not enabled for this bot")
	}
	b, err := h.svc.StartLegacy(r.Context(), bot, r.PathValue("reactionID"), paid, req.Labels)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/broadcasts/"+b.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, b)
}
