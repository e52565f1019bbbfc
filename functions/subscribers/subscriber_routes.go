package subscribers

import (
	"net/http"
	"net/url"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/text"
)

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		return err
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Subscriber, string, error) {
		return h.svc.List(r.Context(), bot(r), f, limit, cursor)
	})
}

// The creation range filter takes times from this window: outside it is a typo, not a
// question about this platform's subscribers.
var (
	minFilterTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxFilterTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// parseFilter reads the list's filters from its query (the route's, or the list tool's
// arguments put as the route takes them). Each may be given once; a malformed one is 400
// invalid_parameter naming it.
func parseFilter(q url.Values) (Filter, error) {
	one := func(name string) (string, error) {
		switch vs := q[name]; {
		case len(vs) == 0:
			return "", nil
		case len(vs) > 1:
			return "", httpapi.InvalidParam(name, name+" may be given only once")
		case vs[0] == "":
			return "", httpapi.InvalidParam(name, name+" must not be empty; omit it to not filter")
		default:
			return vs[0], nil
		}
	}
	var f Filter
	var err error
	if f.Label, err = one("label"); err != nil {
		return f, err
	}
	if f.Label != "" && !ids.Valid("lbl", f.Label) {
		return f, httpapi.InvalidParam("label", "label must be a label id such as lbl_...")
	}
	if f.Channel, err = one("channel"); err != nil {
		return f, err
	}
	if f.Channel != "" && !slices.Contains(Channels(), f.Channel) {
		return f, httpapi.InvalidParam("channel", "channel must be one of telegram, whatsapp, vk, web, email")
	}
	if f.ExternalID, err = one("external_id"); err != nil {
		return f, err
	}
	if f.ExternalID != "" && f.Channel == "" {
		return f, httpapi.InvalidParam("external_id", "external_id needs channel: an external id is unique only within its channel")
	}
	if f.Query, err = one("q"); err != nil {
		return f, err
	}
	if f.Query != "" {
		if err := text.Check(f.Query, text.Line); err != nil {
			return f, httpapi.InvalidParam("q", "q "+err.Error())
		}
		if _, ok := parseSearch(f.Query); !ok || utf8.RuneCountInString(f.Query) > MaxQueryLen {
			return f, httpapi.InvalidParam("q", "q must hold a letter or digit and at most 100 characters")
		}
	}
	for _, b := range []struct {
		name string
		into *time.Time
	}{{"created_from", &f.CreatedFrom}, {"created_to", &f.CreatedTo}} {
		s, err := one(b.name)
		if err != nil || s == "" {
			if err != nil {
				return f, err
			}
			continue
		}
		t, perr := time.Parse(time.RFC3339, s)
		if perr != nil || t.Before(minFilterTime) || t.After(maxFilterTime) {
			return f, httpapi.InvalidParam(b.name, b.name+" must be an RFC 3339 time between the years 2000 and 9999, such as 2026-03-01T00:00:00Z")
		}
		*b.into = t.UTC()
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && !f.CreatedFrom.Before(f.CreatedTo) {
		return f, httpapi.InvalidParam("created_to", "created_to must be after created_from")
	}
	return f, nil
}

// upsertRequest is the body of the create-or-update route.
type upsertRequest struct {
	Channel    string         `json:"channel"`
	ExternalID string         `json:"external_id"`
	FirstName  *string        `json:"first_name"`
	LastName   *string        `json:"last_name"`
	Locale     *string        `json:"locale"`
	Timezone   *string        `json:"timezone"`
	LastSeenAt *string        `json:"last_seen_at"`
	Fields     map[string]any `json:"fields"`
	Labels     []string       `json:"labels"`

	now     func() time.Time
	changes Changes
}

// Validate checks everything the body says on its own; the Service then checks it against
// the bot's labels and fields.
func (u *upsertRequest) Validate() error {
	var p httpapi.Problems
	checkIdentity(&p, u.Channel, u.ExternalID)
	u.changes = Changes{FirstName: u.FirstName, LastName: u.LastName, Locale: u.Locale, Timezone: u.Timezone, Fields: u.Fields, AddLabels: u.Labels}
	if u.LastSeenAt != nil {
		t, err := time.Parse(time.RFC3339, *u.LastSeenAt)
		if err != nil {
			p.Add("last_seen_at", "must be an RFC 3339 time such as 2026-03-01T12:00:00Z")
		} else {
			u.changes.LastSeenAt = &t
		}
	}
	u.changes.check(&p, u.now())
	return p.Err()
}

func (h *Handlers) upsert(w http.ResponseWriter, r *http.Request) error {
	req := upsertRequest{now: h.svc.now}
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	sub, created, err := h.svc.upsert(r.Context(), bot(r), req.Channel, req.ExternalID, req.changes, true, nil)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/api/bots/"+bot(r)+"/subscribers/"+sub.ID)
	}
	return httpapi.WriteJSON(w, status, sub)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	sub, err := h.svc.Get(r.Context(), bot(r), r.PathValue("subscriberID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, sub)
}

// patchRequest is the body of the subscriber PATCH: the attributes a person's profile has,
// and custom field values. Identity, labels and last_seen_at have routes of their own.
type patchRequest struct {
	ExpectedRevision *int64         `json:"expected_revision"`
	FirstName        *string        `json:"first_name"`
	LastName         *string        `json:"last_name"`
	Locale           *string        `json:"locale"`
	Timezone         *string        `json:"timezone"`
	Fields           map[string]any `json:"fields"`

	changes Changes
}

// Validate checks what the body says on its own.
func (u *patchRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(u.ExpectedRevision)
	u.changes = Changes{FirstName: u.FirstName, LastName: u.LastName, Locale: u.Locale, Timezone: u.Timezone, Fields: u.Fields}
	u.changes.check(&p, time.Time{})
	return p.Err()
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req patchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	sub, err := h.svc.Update(r.Context(), bot(r), r.PathValue("subscriberID"), *req.ExpectedRevision, req.changes)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, sub)
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	expected, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), bot(r), r.PathValue("subscriberID"), expected); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

type addLabelRequest struct {
	LabelID string `json:"label_id"`
}

// Validate checks the label id's shape.
func (a *addLabelRequest) Validate() error {
	var p httpapi.Problems
	switch {
	case a.LabelID == "":
		p.Add("label_id", "is required")
	case !ids.Valid("lbl", a.LabelID):
		p.Add("label_id", "must be a label id such as lbl_...")
	}
	return p.Err()
}

func (h *Handlers) addLabel(w http.ResponseWriter, r *http.Request) error {
	var req addLabelRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	sub, err := h.svc.addLabel(r.Context(), bot(r), r.PathValue("subscriberID"), req.LabelID, true)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, sub)
}

func (h *Handlers) removeLabel(w http.ResponseWriter, r *http.Request) error {
	sub, err := h.svc.RemoveLabel(r.Context(), bot(r), r.PathValue("subscriberID"), r.PathValue("labelID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, sub)
}
