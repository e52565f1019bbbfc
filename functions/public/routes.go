// Package public serves the routes that need no credentials: the OpenAPI document and a
// health check.
package public

import (
	"net/http"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/shared/httpapi"
)

// Routes registers the public routes.
func Routes(mux *httpapi.Mux) {
	mux.Handle("GET /openapi.yaml", httpapi.Public(), openAPI)
	mux.Handle("GET /healthz", httpapi.Public(), health)
}

func openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(docs.OpenAPI)
	return err
}

// health answers whether the process can serve; it touches no dependency, so that a store
// outage shows as failing routes (and alarms), not as an instance being replaced.
func health(w http.ResponseWriter, r *http.Request) error {
	return httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
