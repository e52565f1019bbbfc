package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// A write the store refuses as too large is the client's 413, never a 500.
func TestStoreTooLargeIs413(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	k.mux.Handle("GET /api/huge", httpapi.Public(), func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("put: %w", store.ErrTooLarge)
	})
	rec := httptest.NewRecorder()
	k.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/huge", nil))
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Contains(t, rec.Body.String(), `"code":"resource_too_large"`)
}

// A path that holds a capability never reaches the request log.
func TestSecretPathIsNotLogged(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	k.mux.Handle("GET /u/{token}", httpapi.PublicSecretPath(), func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.NoContent(w)
	})
	rec := httptest.NewRecorder()
	k.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/u/s3cr3t-token-value", nil))
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.NotContains(t, k.logs.String(), "s3cr3t-token-value")
	assert.Contains(t, k.logs.String(), `"path":"/u/{token}"`)
}
