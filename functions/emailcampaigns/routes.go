package emailcampaigns

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the email campaign routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the email campaign routes. Every one needs the Reactions right (spec
// 4.3), reads included, and the email_campaigns plan feature.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	register(mux, &Handlers{svc: svc, cursors: cursors})
}

// Unavailable registers the same routes in a process that cannot send campaigns (no email
// sender or link key): each answers 503 saying why, so the access checks still run first.
func Unavailable(mux *httpapi.Mux, reason string) {
	register(unavailableMux{mux, reason}, &Handlers{})
}

// router is what register needs of a mux.
type router interface {
	Handle(pattern string, access httpapi.Access, h httpapi.HandlerFunc)
}

type unavailableMux struct {
	mux    *httpapi.Mux
	reason string
}

func (u unavailableMux) Handle(pattern string, access httpapi.Access, _ httpapi.HandlerFunc) {
	u.mux.Handle(pattern, access, func(http.ResponseWriter, *http.Request) error {
		return httpapi.Errorf(httpapi.KindUnavailable, "email_campaigns_unavailable", "this deployment cannot send email campaigns: %s", u.reason)
	})
}

func register(mux router, h *Handlers) {
	const (
		list = "/api/bots/{botID}/email-campaigns"
		one  = list + "/{campaignID}"
	)
	read := httpapi.Need("email_campaigns:read", auth.RightReactions).InPlan(auth.FeatureEmailCampaigns)
	write := httpapi.Need("email_campaigns:write", auth.RightReactions).InPlan(auth.FeatureEmailCampaigns)
	mux.Handle("GET "+list, read, h.list)
	mux.Handle("POST "+list, write, h.create)
	mux.Handle("GET "+one, read, h.get)
	mux.Handle("PATCH "+one, write, h.update)
	mux.Handle("GET "+one+"/report", read, h.report)
	mux.Handle("GET "+one+"/recipients", read, h.recipients)
	mux.Handle("GET "+one+"/links", read, h.links)
	// consent-preview changes nothing but is POST (spec 4.3 rule 1) and so audited; reading
	// is enough to ask it.
	mux.Handle("POST "+one+"/consent-preview", read, h.consentPreview)
	mux.Handle("POST "+one+"/test-send", write, h.testSend)
	mux.Handle("POST "+one+"/schedule", write, h.schedule)
	mux.Handle("POST "+one+"/clone", write, h.clone)
	mux.Handle("POST "+one+"/pause", write, h.transition((*Service).Pause))
	mux.Handle("POST "+one+"/resume", write, h.transition((*Service).Resume))
	mux.Handle("POST "+one+"/cancel", write, h.transition((*Service).Cancel))
	mux.Handle("POST "+one+"/archive", write, h.transition((*Service).Archive))
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	var state State
	if s := State(r.URL.Query().Get("state")); s != "" {
		if !slices.Contains(States(), s) {
			return httpapi.InvalidParam("state", "state must be one of "+joinStates(States()))
		}
		state = s
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Campaign, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), state, limit, cursor)
	})
}

func joinStates[T ~string](list []T) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req Definition
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	c, err := h.svc.Create(r.Context(), bot, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/email-campaigns/"+c.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, c)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	c, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
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
	if v.Name == nil && v.ContentID == nil && v.Audience == nil {
		p.Add("name", "give name, content_id, audience or several")
	}
	return p.Err()
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req patchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	c, err := h.svc.Update(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"), *req.ExpectedRevision, req.Definition)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

func (h *Handlers) report(w http.ResponseWriter, r *http.Request) error {
	rep, err := h.svc.Report(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}

func (h *Handlers) recipients(w http.ResponseWriter, r *http.Request) error {
	var state RowState
	if s := RowState(r.URL.Query().Get("state")); s != "" {
		if !slices.Contains(RowStates(), s) {
			return httpapi.InvalidParam("state", "state must be one of "+joinStates(RowStates()))
		}
		state = s
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Recipient, string, error) {
		return h.svc.Recipients(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"), state, limit, cursor)
	})
}

func (h *Handlers) links(w http.ResponseWriter, r *http.Request) error {
	links, err := h.svc.Links(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"))
	if err != nil {
		return err
	}
	// At most MaxLinks: one page, in the shape of every list.
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.List[Link]{Data: links})
}

func (h *Handlers) consentPreview(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	p, err := h.svc.ConsentPreview(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

type testSendRequest struct {
	Addresses []string `json:"addresses"`
}

func (h *Handlers) testSend(w http.ResponseWriter, r *http.Request) error {
	var req testSendRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	res, err := h.svc.TestSend(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"), req.Addresses)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

// scheduleRequest is schedule's body. send_at is RFC 3339 in UTC ("Z" or +00:00).
type scheduleRequest struct {
	ExpectedRevision *int64  `json:"expected_revision"`
	Confirm          *bool   `json:"confirm"`
	SendAt           *string `json:"send_at"`
	sendAt           *time.Time
}

// Validate checks what decoding cannot: confirm first (its own code), then the rest.
func (v *scheduleRequest) Validate() error {
	if v.Confirm == nil || !*v.Confirm {
		return httpapi.E(httpapi.KindInvalid, "confirmation_required", "scheduling sends email to real people: send confirm: true").
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
	c, err := h.svc.Schedule(r.Context(), r.PathValue("botID"), r.PathValue("campaignID"), *req.ExpectedRevision, req.sendAt)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, c)
}

type cloneRequest struct {
	Name *string `json:"name"`
}

func (h *Handlers) clone(w http.ResponseWriter, r *http.Request) error {
	var req cloneRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	c, err := h.svc.Clone(r.Context(), bot, r.PathValue("campaignID"), req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/email-campaigns/"+c.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, c)
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

// transition serves pause, resume, cancel and archive: a body with expected_revision.
func (h *Handlers) transition(do func(*Service, context.Context, string, string, int64) (Campaign, error)) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		var req revisionRequest
		if err := httpapi.Decode(w, r, &req); err != nil {
			return err
		}
		c, err := do(h.svc, r.Context(), r.PathValue("botID"), r.PathValue("campaignID"), *req.ExpectedRevision)
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, http.StatusOK, c)
	}
}
