// Package pats serves the personal access token routes. Only a token with the full scope
// manages tokens, and each user manages only their own.
package pats

import (
	"errors"
	"net/http"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the PAT routes.
type Handlers struct {
	auth    *auth.Service
	cursors *httpapi.Cursors
	now     func() time.Time
}

// Routes registers the PAT routes.
func Routes(mux *httpapi.Mux, a *auth.Service, cursors *httpapi.Cursors, now func() time.Time) {
	h := &Handlers{auth: a, cursors: cursors, now: now}
	mux.Handle("GET /api/personal-access-tokens", httpapi.NeedPAT(auth.Full), h.list)
	mux.Handle("POST /api/personal-access-tokens", httpapi.NeedPAT(auth.Full), h.create)
	mux.Handle("DELETE /api/personal-access-tokens/{tokenID}", httpapi.NeedPAT(auth.Full), h.delete)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	p := httpapi.Caller(r)
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]auth.PAT, string, error) {
		return h.auth.ListPATs(r.Context(), p.AccountID, p.UserID, limit, cursor)
	})
}

// createRequest takes the expiry as an RFC 3339 time or, for scripts and examples that must
// not go stale, as a number of days from now.
type createRequest struct {
	Name          string   `json:"name"`
	Scopes        []string `json:"scopes"`
	ExpiresAt     *string  `json:"expires_at"`
	ExpiresInDays *int     `json:"expires_in_days"`
}

func (c *createRequest) parse(now time.Time) (auth.Scopes, time.Time, error) {
	var p httpapi.Problems
	if _, err := auth.CheckName(c.Name); err != nil {
		p.Add("name", "%v", err)
	}
	scopes, err := auth.ValidateScopes(c.Scopes)
	if err != nil {
		p.Add("scopes", "%v", err)
	}
	var exp time.Time
	switch {
	case c.ExpiresAt != nil && c.ExpiresInDays != nil:
		p.Add("expires_at", "send expires_at or expires_in_days, not both")
	case c.ExpiresAt != nil:
		if exp, err = time.Parse(time.RFC3339, *c.ExpiresAt); err != nil {
			p.Add("expires_at", "must be an RFC 3339 time such as 2027-01-31T00:00:00Z")
		} else if err := auth.CheckExpiry(exp, now); err != nil || exp.Before(now.Add(time.Minute)) {
			p.Add("expires_at", "must be at least a minute in the future and at most 365 days away")
		}
	case c.ExpiresInDays != nil:
		if d := *c.ExpiresInDays; d < 1 || d > 365 {
			p.Add("expires_in_days", "must be from 1 to 365")
		} else {
			exp = now.AddDate(0, 0, d)
		}
	default:
		p.Add("expires_at", "is required: every token expires, at most 365 days from now")
	}
	return scopes, exp, p.Err()
}

// createdPAT is the only response that ever carries a PAT's value.
type createdPAT struct {
	auth.PAT
	Token string `json:"token"`
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	scopes, exp, err := req.parse(h.now().UTC())
	if err != nil {
		return err
	}
	pat, secret, err := h.auth.CreatePAT(r.Context(), httpapi.Caller(r), req.Name, scopes, exp)
	switch {
	case errors.Is(err, auth.ErrScopeTooBroad):
		return httpapi.E(httpapi.KindForbidden, "insufficient_scope", "a new token's scopes cannot exceed the scopes of the token that creates it")
	case errors.Is(err, auth.ErrLimitReached):
		return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a user may have at most %d personal access tokens; delete one first", auth.MaxPATsPerUser)
	case errors.Is(err, auth.ErrInvalidExpiry), errors.Is(err, auth.ErrInvalidRequest):
		return httpapi.E(httpapi.KindInvalid, "validation_failed", err.Error())
	case err != nil:
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return httpapi.WriteJSON(w, http.StatusCreated, createdPAT{PAT: pat, Token: secret})
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	p := httpapi.Caller(r)
	err := h.auth.RevokePAT(r.Context(), p.AccountID, p.UserID, r.PathValue("tokenID"))
	if errors.Is(err, auth.ErrNotFound) {
		return httpapi.NotFound("personal access token")
	}
	if err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
