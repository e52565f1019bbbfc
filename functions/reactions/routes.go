package reactions

import (
	"net/http"
	"strconv"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
)

// Handlers serves the reaction routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers every reaction route with its scope and right. All are bot-scoped, so a
// bot API token may call them on its own bot. Reads need only the scope; every write also
// needs the bot's reactions right. The literal /export and /import are registered next to
// /{reactionID}: ServeMux prefers the literal segment, so they are never read as ids.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const base = "/api/bots/{botID}/reactions"
	read, write := httpapi.Need("reactions:read"), httpapi.Need("reactions:write", auth.RightReactions)
	mux.Handle("GET "+base, read, h.list)
	mux.Handle("POST "+base, write, h.create)
	mux.Handle("GET "+base+"/export", read, h.export)
	mux.Handle("POST "+base+"/import", write, h.importBundle)
	mux.Handle("GET "+base+"/{reactionID}", read, h.get)
	mux.Handle("PATCH "+base+"/{reactionID}", write, h.update)
	mux.Handle("DELETE "+base+"/{reactionID}", write, h.delete)
	mux.Handle("POST "+base+"/{reactionID}/publish", write, h.publish)
	mux.Handle("GET "+base+"/{reactionID}/versions", read, h.versions)
	mux.Handle("GET "+base+"/{reactionID}/versions/{version}", read, h.version)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	var f Filter
	q := r.URL.Query()
	if v := q.Get("trigger_type"); v != "" || q.Has("trigger_type") {
		if !knownTrigger(TriggerType(v)) {
			return httpapi.InvalidParam("trigger_type", "trigger_type must be one of start, keyword, label_added, button, api")
		}
		f.TriggerType = TriggerType(v)
	}
	if v := q.Get("published"); v != "" || q.Has("published") {
		b, err := strconv.ParseBool(v)
		if err != nil || (v != "true" && v != "false") {
			return httpapi.InvalidParam("published", "published must be true or false")
		}
		f.Published = &b
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Summary, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), f, limit, cursor)
	})
}

type createRequest struct {
	Name    string  `json:"name"`
	Trigger Trigger `json:"trigger"`
	Steps   []Step  `json:"steps"`
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	rx, err := h.svc.Create(r.Context(), bot, Content{Name: req.Name, Trigger: req.Trigger, Steps: req.Steps})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/reactions/"+rx.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, rx)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	rx, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("reactionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rx)
}

type updateRequest struct {
	ExpectedRevision *int64   `json:"expected_revision"`
	Name             *string  `json:"name"`
	Trigger          *Trigger `json:"trigger"`
	Steps            *[]Step  `json:"steps"`
}

// Validate checks what decoding cannot.
func (u *updateRequest) Validate() error {
	var p httpapi.Problems
	if u.ExpectedRevision == nil {
		p.Add("expected_revision", "is required: send the revision you last read")
	}
	return p.Err()
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req updateRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	rx, err := h.svc.Update(r.Context(), r.PathValue("botID"), r.PathValue("reactionID"), *req.ExpectedRevision,
		Patch{Name: req.Name, Trigger: req.Trigger, Steps: req.Steps})
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rx)
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	expected, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), r.PathValue("botID"), r.PathValue("reactionID"), expected); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

type publishRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (p *publishRequest) Validate() error {
	var probs httpapi.Problems
	if p.ExpectedRevision == nil {
		probs.Add("expected_revision", "is required: send the revision of the draft you publish")
	}
	return probs.Err()
}

func (h *Handlers) publish(w http.ResponseWriter, r *http.Request) error {
	var req publishRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	rx, warnings, err := h.svc.PublishWithWarnings(r.Context(), r.PathValue("botID"), r.PathValue("reactionID"), *req.ExpectedRevision)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, publication{Reaction: rx, Warnings: warnings})
}

// publication is the answer of a publish: the reaction, and what publishing did not refuse
// but will not work as things stand (a template not approved yet), each with its path.
type publication struct {
	Reaction
	Warnings []Warning `json:"warnings"`
}

func (h *Handlers) versions(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]VersionSummary, string, error) {
		return h.svc.Versions(r.Context(), r.PathValue("botID"), r.PathValue("reactionID"), limit, cursor)
	})
}

func (h *Handlers) version(w http.ResponseWriter, r *http.Request) error {
	// A version is a positive integer; anything else cannot exist (404, like a malformed id).
	raw := r.PathValue("version")
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != raw {
		if _, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("reactionID")); err != nil {
			return err
		}
		return httpapi.NotFound("version")
	}
	v, err := h.svc.Version(r.Context(), r.PathValue("botID"), r.PathValue("reactionID"), n)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

func (h *Handlers) export(w http.ResponseWriter, r *http.Request) error {
	only := r.URL.Query()["reaction_id"]
	for _, id := range only {
		if !ids.Valid("rct", id) {
			return httpapi.InvalidParam("reaction_id", "reaction_id must be a reaction id (rct_...)")
		}
	}
	b, err := h.svc.Export(r.Context(), r.PathValue("botID"), only)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, b)
}

type importRequest struct {
	Mode   ImportMode `json:"mode"`
	Bundle *Bundle    `json:"bundle"`
}

// Validate checks what decoding cannot.
func (i *importRequest) Validate() error {
	var p httpapi.Problems
	switch i.Mode {
	case ImportDryRun, ImportCreate, ImportReplace:
	case "":
		p.Add("mode", "is required: dry_run, create or replace")
	default:
		p.Add("mode", "must be dry_run, create or replace")
	}
	if i.Bundle == nil {
		p.Add("bundle", "is required: a bundle as GET .../reactions/export returns it")
	}
	return p.Err()
}

func (h *Handlers) importBundle(w http.ResponseWriter, r *http.Request) error {
	var req importRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	rep, err := h.svc.Import(r.Context(), r.PathValue("botID"), req.Mode, *req.Bundle)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, rep)
}
