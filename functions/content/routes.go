package content

import (
	"encoding/json"
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the content routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the content document and content template routes. Every one needs the
// Reactions right (spec 4.3), reads included: content is builder material.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	const (
		docs = "/api/bots/{botID}/content"
		doc  = docs + "/{documentID}"
		tpls = "/api/bots/{botID}/content-templates"
	)
	read := httpapi.Need("content:read", auth.RightReactions)
	write := httpapi.Need("content:write", auth.RightReactions)
	mux.Handle("GET "+docs, read, h.list)
	mux.Handle("POST "+docs, write, h.create)
	mux.Handle("GET "+docs+"/test-recipients", read, h.testRecipients)
	mux.Handle("GET "+doc, read, h.get)
	mux.Handle("PATCH "+doc+"/draft", write, h.updateDraft)
	mux.Handle("POST "+doc+"/publish", write, h.publish)
	mux.Handle("POST "+doc+"/clone", write, h.clone)
	mux.Handle("POST "+doc+"/archive", write, h.archive)
	mux.Handle("POST "+doc+"/test-send", write, h.testSend)
	// validate and preview change nothing but are POST (they take a body) and so audited.
	mux.Handle("POST "+doc+"/validate", read, h.validate)
	mux.Handle("POST "+doc+"/preview", read, h.preview)
	mux.Handle("GET "+tpls, read, h.listTemplates)
	mux.Handle("POST "+tpls, write, h.createTemplate)
	mux.Handle("DELETE "+tpls+"/{templateID}", write, h.deleteTemplate)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f Filter
	if t := q.Get("type"); t != "" {
		if !validType(Type(t)) {
			return httpapi.InvalidParam("type", "type must be message, email or push")
		}
		f.Type = Type(t)
	}
	switch q.Get("archived") {
	case "", "false":
	case "true":
		f.Archived = true
	default:
		return httpapi.InvalidParam("archived", "archived must be true or false")
	}
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Document, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), f, limit, cursor)
	})
}

type createRequest struct {
	Type       Type            `json:"type"`
	Name       string          `json:"name"`
	Draft      json.RawMessage `json:"draft"`
	TemplateID *string         `json:"template_id"`
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	bot := r.PathValue("botID")
	d, err := h.svc.Create(r.Context(), bot, NewDocument(req))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/content/"+d.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, d)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	d, err := h.svc.Get(r.Context(), r.PathValue("botID"), r.PathValue("documentID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

type revisionRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (v *revisionRequest) Validate() error { return requireRevision(v.ExpectedRevision) }

func requireRevision(rev *int64) error {
	var p httpapi.Problems
	p.RequireRevision(rev)
	return p.Err()
}

type draftRequest struct {
	ExpectedRevision *int64          `json:"expected_revision"`
	Name             *string         `json:"name"`
	Draft            json.RawMessage `json:"draft"`
}

// Validate checks what decoding cannot.
func (v *draftRequest) Validate() error {
	if err := requireRevision(v.ExpectedRevision); err != nil {
		return err
	}
	var p httpapi.Problems
	if v.Name == nil && v.Draft == nil {
		p.Add("draft", "give draft, name or both")
	}
	return p.Err()
}

func (h *Handlers) updateDraft(w http.ResponseWriter, r *http.Request) error {
	var req draftRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	d, err := h.svc.UpdateDraft(r.Context(), r.PathValue("botID"), r.PathValue("documentID"), *req.ExpectedRevision, req.Name, req.Draft)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Handlers) publish(w http.ResponseWriter, r *http.Request) error {
	var req revisionRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	d, err := h.svc.Publish(r.Context(), r.PathValue("botID"), r.PathValue("documentID"), *req.ExpectedRevision)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
}

func (h *Handlers) archive(w http.ResponseWriter, r *http.Request) error {
	var req revisionRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	d, err := h.svc.Archive(r.Context(), r.PathValue("botID"), r.PathValue("documentID"), *req.ExpectedRevision)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, d)
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
	d, err := h.svc.Clone(r.Context(), bot, r.PathValue("documentID"), req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot+"/content/"+d.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, d)
}

func (h *Handlers) validate(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	v, err := h.svc.Validate(r.Context(), r.PathValue("botID"), r.PathValue("documentID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

func (h *Handlers) preview(w http.ResponseWriter, r *http.Request) error {
	var req PreviewRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	p, err := h.svc.Preview(r.Context(), r.PathValue("botID"), r.PathValue("documentID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}

type testSendRequest struct {
	SubscriberID string `json:"subscriber_id"`
}

// Validate checks what decoding cannot.
func (v *testSendRequest) Validate() error {
	var p httpapi.Problems
	if v.SubscriberID == "" {
		p.Add("subscriber_id", "is required: one of GET .../content/test-recipients")
	}
	return p.Err()
}

func (h *Handlers) testSend(w http.ResponseWriter, r *http.Request) error {
	var req testSendRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	res, err := h.svc.TestSend(r.Context(), r.PathValue("botID"), r.PathValue("documentID"), req.SubscriberID)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

func (h *Handlers) testRecipients(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Recipient, string, error) {
		return h.svc.TestRecipients(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) listTemplates(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Template, string, error) {
		return h.svc.ListTemplates(r.Context(), r.PathValue("botID"), limit, cursor)
	})
}

func (h *Handlers) createTemplate(w http.ResponseWriter, r *http.Request) error {
	var req NewTemplate
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	t, err := h.svc.CreateTemplate(r.Context(), r.PathValue("botID"), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusCreated, t)
}

func (h *Handlers) deleteTemplate(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.DeleteTemplate(r.Context(), r.PathValue("botID"), r.PathValue("templateID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
