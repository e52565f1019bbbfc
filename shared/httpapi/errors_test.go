package httpapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An extension named like a standard member would be overwritten by it in the problem
// document, so With refuses it at once instead of dropping it silently.
func TestWithRefusesStandardMembers(t *testing.T) {
	for _, name := range []string{"type", "title", "status", "detail", "code", "request_id"} {
		assert.Panics(t, func() { E(KindConflict, "x", "y").With(name, 1) }, name)
	}
	p := E(KindConflict, "install_in_progress", "busy").With("install_status", "installing").Problem("req_1")
	assert.Equal(t, "installing", p["install_status"])
	assert.Equal(t, 409, p["status"])
}
