package httpapi

import (
	"net/http"
	"strconv"
)

// ExpectedRevision reads the optional ?expected_revision=N of a request without a body (a
// DELETE): nil when absent or empty, else a revision of at least 1, or 400
// invalid_parameter. In bodies the strict decoder holds every expected_revision member to
// the same rule (400 invalid_body naming the field).
func ExpectedRevision(r *http.Request) (*int64, error) {
	s := r.URL.Query().Get("expected_revision")
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return nil, InvalidParam("expected_revision", "expected_revision must be a revision you read: an integer of at least 1")
	}
	return &n, nil
}

// RequireRevision adds the problem of a mutation body without expected_revision: it must say
// which revision it changes (values below 1 never get here: the strict decoder refuses them).
func (p *Problems) RequireRevision(rev *int64) {
	if rev == nil {
		p.Add("expected_revision", "is required: send the revision you last read")
	}
}
