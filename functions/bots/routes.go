package bots

import (
	"errors"
	"net/http"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the bot routes.
type Handlers struct {
	svc     *Service
	auth    *auth.Service
	cursors *httpapi.Cursors
}

// Routes registers every bot route with its scope and rights.
func Routes(mux *httpapi.Mux, svc *Service, a *auth.Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, auth: a, cursors: cursors}
	mux.Handle("GET /api/bots", httpapi.NeedPAT("bots:read"), h.list)
	mux.Handle("POST /api/bots", httpapi.NeedPAT("bots:write"), h.create)
	mux.Handle("GET /api/bots/{botID}", httpapi.Need("bots:read"), h.get)
	mux.Handle("PATCH /api/bots/{botID}", httpapi.Need("bots:write", auth.RightReactions), h.update)
	mux.Handle("DELETE /api/bots/{botID}", httpapi.NeedPAT("bots:write", auth.RightReactions), h.delete)
	mux.Handle("GET /api/bots/{botID}/api-tokens", httpapi.NeedPAT("bots:read"), h.listTokens)
	// A bot token holds every right on its bot, so only a user who holds them all may mint one.
	mux.Handle("POST /api/bots/{botID}/api-tokens",
		httpapi.NeedPAT("bots:write", auth.RightReactions, auth.RightDialogs, auth.RightAnalytics), h.createToken)
	mux.Handle("DELETE /api/bots/{botID}/api-tokens/{tokenID}", httpapi.NeedPAT("bots:write", auth.RightReactions), h.deleteToken)
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Bot, string, error) {
		return h.svc.List(r.Context(), httpapi.Caller(r).AccountID, limit, cursor)
	})
}

type createRequest struct {
	Name     string         `json:"name"`
	Settings *SettingsPatch `json:"settings"`
}

func (h *Handlers) create(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	b, err := h.svc.Create(r.Context(), httpapi.Caller(r).AccountID, req.Name, req.Settings)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+b.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, b)
}

func (h *Handlers) get(w http.ResponseWriter, r *http.Request) error {
	// The kernel loaded the bot for the tenancy check; serve that read.
	if b, ok := httpapi.LoadedBot(r.Context()).(Bot); ok {
		return httpapi.WriteJSON(w, http.StatusOK, b)
	}
	b, err := h.svc.Get(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("botID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, b)
}

type updateRequest struct {
	ExpectedRevision *int64         `json:"expected_revision"`
	Name             *string        `json:"name"`
	Settings         *SettingsPatch `json:"settings"`
}

// Validate checks what decoding cannot.
func (u *updateRequest) Validate() error {
	var p httpapi.Problems
	if u.ExpectedRevision == nil {
		p.Add("expected_revision", "is required: send the revision you last read")
	}
	return p.Err()
}

func (h *Handlers) update(w http.ResponseWriter, r *http.Request) error {
	var req updateRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	account := httpapi.Caller(r).AccountID
	var b Bot
	var err error
	if loaded, ok := httpapi.LoadedBot(r.Context()).(Bot); ok {
		b, err = h.svc.update(r.Context(), account, loaded, *req.ExpectedRevision, req.Name, req.Settings)
	} else {
		b, err = h.svc.Update(r.Context(), account, r.PathValue("botID"), *req.ExpectedRevision, req.Name, req.Settings)
	}
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, b)
}

func (h *Handlers) delete(w http.ResponseWriter, r *http.Request) error {
	expected, err := httpapi.ExpectedRevision(r)
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("botID"), expected); err != nil {
		return err
	}
	httpapi.BotDeleted(r.Context()) // its request log is being erased: add nothing to it
	return httpapi.NoContent(w)
}

func (h *Handlers) listTokens(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]auth.BotToken, string, error) {
		return h.auth.ListBotTokens(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("botID"), limit, cursor)
	})
}

type createTokenRequest struct {
	Name string `json:"name"`
}

// Validate checks the token name.
func (c *createTokenRequest) Validate() error {
	var p httpapi.Problems
	if _, err := auth.CheckName(c.Name); err != nil {
		p.Add("name", "%v", err)
	}
	return p.Err()
}

// createdToken is the only response that ever carries a bot token's value.
type createdToken struct {
	auth.BotToken
	Token string `json:"token"`
}

func (h *Handlers) createToken(w http.ResponseWriter, r *http.Request) error {
	var req createTokenRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	p := httpapi.Caller(r)
	bot := r.PathValue("botID")
	t, secret, err := h.svc.IssueToken(r.Context(), p.AccountID, bot, p.UserID, req.Name)
	switch {
	case errors.Is(err, auth.ErrLimitReached):
		return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot may have at most %d API tokens; delete one first", auth.MaxBotTokensPerBot)
	case errors.Is(err, auth.ErrNotFound):
		return botNotFound()
	case err != nil:
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return httpapi.WriteJSON(w, http.StatusCreated, createdToken{BotToken: t, Token: secret})
}

func (h *Handlers) deleteToken(w http.ResponseWriter, r *http.Request) error {
	err := h.auth.RevokeBotToken(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("botID"), r.PathValue("tokenID"))
	if errors.Is(err, auth.ErrNotFound) {
		return httpapi.NotFound("API token")
	}
	if err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
