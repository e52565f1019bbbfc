package channels

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
)

// Handlers serves the channel routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the channel routes (spec 4.1: scopes bots:read / bots:write, no channel
// scope). Connecting and disconnecting change the bot's configuration: the Reactions right.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	mux.Handle("GET /api/channels/capabilities", httpapi.NeedPAT("bots:read"), h.capabilities)
	mux.Handle("GET /api/bots/{botID}/channels", httpapi.Need("bots:read"), h.list)
	mux.Handle("POST /api/bots/{botID}/channels", httpapi.Need("bots:write", auth.RightReactions), h.connect)
	mux.Handle("DELETE /api/bots/{botID}/channels/{channelID}", httpapi.Need("bots:write", auth.RightReactions), h.disconnect)
}

// capabilities answers the matrix built from the adapters' own declarations.
func (h *Handlers) capabilities(w http.ResponseWriter, r *http.Request) error {
	out := []channel.Capabilities{}
	for _, k := range channel.Kinds() {
		if a, ok := h.svc.Adapter(k); ok {
			out = append(out, a.Capabilities())
		}
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"data": out})
}

func (h *Handlers) list(w http.ResponseWriter, r *http.Request) error {
	page, err := h.cursors.Page(r)
	if err != nil {
		return err
	}
	list, next, err := h.svc.List(r.Context(), r.PathValue("botID"), page.Limit, page.Cursor)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, httpapi.List[Channel]{Data: list, NextCursor: h.cursors.Next(page, next)})
}

// connectRequest keeps the credentials raw: their shape depends on the type.
type connectRequest struct {
	Type        channel.Kind    `json:"type"`
	Name        string          `json:"name"`
	Credentials json.RawMessage `json:"credentials"`
}

// restTypes are the types a client may connect (spec 4.1); Telegram is connected by an
// operator with the admin CLI.
var restTypes = []channel.Kind{channel.WhatsApp, channel.VK}

func (h *Handlers) connect(w http.ResponseWriter, r *http.Request) error {
	var req connectRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	var p httpapi.Problems
	if !slices.Contains(restTypes, req.Type) {
		p.Add("type", "must be whatsapp or vk; a Telegram channel is connected by an operator (admin channel connect)")
	}
	if len([]rune(strings.TrimSpace(req.Name))) > 100 {
		p.Add("name", "must be at most 100 characters")
	}
	if len(req.Credentials) == 0 || string(req.Credentials) == "null" {
		p.Add("credentials", "is required")
	}
	if err := p.Err(); err != nil {
		return err
	}
	a, ok := h.svc.Adapter(req.Type)
	if !ok {
		return httpapi.Errorf(httpapi.KindUnavailable, "provider_unavailable", "this deployment has no %s adapter", req.Type)
	}
	creds := a.Credentials()
	if err := httpapi.DecodeJSON(req.Credentials, creds, "credentials"); err != nil {
		return err
	}
	c, err := h.svc.Connect(r.Context(), httpapi.Caller(r).AccountID, r.PathValue("botID"), req.Type, req.Name, creds)
	if errors.Is(err, ErrUnknownType) {
		return httpapi.Errorf(httpapi.KindUnavailable, "provider_unavailable", "this deployment has no %s adapter", req.Type)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/bots/"+c.BotID+"/channels/"+c.ID)
	return httpapi.WriteJSON(w, http.StatusCreated, c)
}

func (h *Handlers) disconnect(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.Disconnect(r.Context(), r.PathValue("botID"), r.PathValue("channelID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
