package subscribers

import (
	"net/http"

	"github.com/botplatform/api/shared/httpapi"
)

func (h *Handlers) listFields(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Field, string, error) {
		return h.svc.ListFields(r.Context(), bot(r), limit, cursor)
	})
}

// createFieldRequest is a FieldSpec; its own type keeps the body's schema in this file.
type createFieldRequest FieldSpec

// Validate checks the name and the type.
func (c *createFieldRequest) Validate() error {
	var p httpapi.Problems
	FieldSpec(*c).check(&p, "")
	return p.Err()
}

func (h *Handlers) createField(w http.ResponseWriter, r *http.Request) error {
	var req createFieldRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	f, err := h.svc.CreateField(r.Context(), bot(r), FieldSpec(req))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot(r)+"/fields/"+f.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, f)
}

func (h *Handlers) deleteField(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.DeleteField(r.Context(), bot(r), r.PathValue("fieldID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
