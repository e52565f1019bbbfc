package subscribers

import (
	"net/http"

	"github.com/botplatform/api/shared/httpapi"
)

func (h *Handlers) listLabels(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Label, string, error) {
		return h.svc.ListLabels(r.Context(), bot(r), limit, cursor)
	})
}

type createLabelRequest struct {
	Name string `json:"name"`
}

func (h *Handlers) createLabel(w http.ResponseWriter, r *http.Request) error {
	var req createLabelRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	l, err := h.svc.CreateLabel(r.Context(), bot(r), req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+bot(r)+"/labels/"+l.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, l)
}

type renameLabelRequest struct {
	ExpectedRevision *int64  `json:"expected_revision"`
	Name             *string `json:"name"`
}

// Validate checks what decoding cannot.
func (u *renameLabelRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(u.ExpectedRevision)
	if u.Name == nil {
		p.Add("name", "is required: renaming is the only change a label takes")
	} else {
		checkLabelName(&p, "name", *u.Name)
	}
	return p.Err()
}

func (h *Handlers) renameLabel(w http.ResponseWriter, r *http.Request) error {
	var req renameLabelRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	l, err := h.svc.RenameLabel(r.Context(), bot(r), r.PathValue("labelID"), *req.ExpectedRevision, *req.Name)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, l)
}

func (h *Handlers) deleteLabel(w http.ResponseWriter, r *http.Request) error {
	expected, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteLabel(r.Context(), bot(r), r.PathValue("labelID"), expected); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
