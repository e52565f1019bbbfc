package crm

import (
	"net/http"

	"github.com/botplatform/api/shared/httpapi"
)

// mappingRoutes registers a connection's field discovery, mapping and preview routes
// under conn (.../crm/connections/{connectionID}), with the connection routes' access.
// The preview reads a subscriber's data, so it takes crm:write, the scope that would sync
// that data, although it changes nothing (docs/crm.md).
func (h *Handlers) mappingRoutes(mux *httpapi.Mux, conn string, read, write httpapi.Access) {
	mux.Handle("GET "+conn+"/objects", read, h.objects)
	mux.Handle("GET "+conn+"/objects/{object}/fields", read, h.fields)
	mux.Handle("GET "+conn+"/pipelines", read, h.pipelines)
	mux.Handle("GET "+conn+"/mapping", read, h.getMapping)
	mux.Handle("PUT "+conn+"/mapping", write, h.putMapping)
	mux.Handle("GET "+conn+"/mapping/revisions", read, h.revisions)
	mux.Handle("GET "+conn+"/mapping/revisions/{revision}", read, h.revision)
	mux.Handle("POST "+conn+"/preview", write, h.preview)
}

func (h *Handlers) preview(w http.ResponseWriter, r *http.Request) error {
	var req PreviewRequest
	if err := httpapi.DecodeOptional(w, r, &req); err != nil {
		return err
	}
	p, err := h.svc.Preview(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), req.SubscriberID)
	if err != nil {
		return retryAfter(w, err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, p)
}
