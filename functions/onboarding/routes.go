package onboarding

import (
	"net/http"

	"github.com/botplatform/api/shared/httpapi"
)

const sessionPath = "/api/onboarding/session"

type handlers struct{ svc *Service }

// Routes registers the onboarding routes: reading needs bots:read, the others bots:write;
// personal access tokens only (the session is the account's).
func Routes(mux *httpapi.Mux, svc *Service) {
	h := &handlers{svc: svc}
	mux.Handle("POST "+sessionPath, writeAccess, h.create)
	mux.Handle("GET "+sessionPath, readAccess, h.get)
	mux.Handle("PATCH "+sessionPath, writeAccess, h.patch)
	mux.Handle("POST "+sessionPath+"/complete", writeAccess, h.complete)
}

func (h *handlers) create(w http.ResponseWriter, r *http.Request) error {
	var f Fields
	if err := httpapi.Decode(w, r, &f); err != nil {
		return err
	}
	ss, err := h.svc.Create(r.Context(), httpapi.Caller(r), f)
	if err != nil {
		return err
	}
	w.Header().Set("Location", sessionPath)
	return httpapi.WriteJSON(w, http.StatusCreated, ss)
}

func (h *handlers) get(w http.ResponseWriter, r *http.Request) error {
	ss, err := h.svc.Get(r.Context(), httpapi.Caller(r))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, ss)
}

func (h *handlers) patch(w http.ResponseWriter, r *http.Request) error {
	var req PatchRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	ss, err := h.svc.Patch(r.Context(), httpapi.Caller(r), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, ss)
}

func (h *handlers) complete(w http.ResponseWriter, r *http.Request) error {
	var req CompleteRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	ss, err := h.svc.Complete(r.Context(), httpapi.Caller(r), req)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, ss)
}
