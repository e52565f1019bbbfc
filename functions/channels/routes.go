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
	"github.com/botplatform/api/shared/text"
)

// Handlers serves the channel routes.
type Handlers struct {
	svc     *Service
	cursors *httpapi.Cursors
}

// Routes registers the channel routes (spec 4.1: scopes bots:read / bots:write, no channel
// scope). Connecting and disconnecting channels and changing templates change the bot's
// configuration: the Reactions right. A nil svc (a process that holds no key to seal
// credentials with) serves every route as 503 channels_unavailable rather than not at all.
func Routes(mux *httpapi.Mux, svc *Service, cursors *httpapi.Cursors) {
	h := &Handlers{svc: svc, cursors: cursors}
	write := httpapi.Need("bots:write", auth.RightReactions)
	for _, rt := range []struct {
		pattern string
		access  httpapi.Access
		handler httpapi.HandlerFunc
	}{
		{"GET /api/channels/capabilities", httpapi.NeedPAT("bots:read"), h.capabilities},
		{"GET /api/bots/{botID}/channels", httpapi.Need("bots:read"), h.list},
		{"POST /api/bots/{botID}/channels", write, h.connect},
		{"DELETE /api/bots/{botID}/channels/{channelID}", write, h.disconnect},
		{"GET /api/bots/{botID}/channels/{channelID}/templates", httpapi.Need("bots:read"), h.listTemplates},
		{"POST /api/bots/{botID}/channels/{channelID}/templates", write, h.createTemplate},
		{"POST /api/bots/{botID}/channels/{channelID}/templates/sync", write, h.syncTemplates},
		{"POST /api/bots/{botID}/channels/{channelID}/templates/media", write, h.uploadMedia},
		{"PUT /api/bots/{botID}/channels/{channelID}/templates/{templateID}", write, h.editTemplate},
		{"DELETE /api/bots/{botID}/channels/{channelID}/templates/{templateID}", write, h.deleteTemplate},
	} {
		handler := rt.handler
		if svc == nil {
			handler = unavailable
		}
		mux.Handle(rt.pattern, rt.access, handler)
	}
}

// unavailable answers every channel route of a process without a secrets key.
func unavailable(http.ResponseWriter, *http.Request) error {
	return httpapi.E(httpapi.KindUnavailable, "channels_unavailable",
		"this deployment holds no key to seal channel credentials with (SECRETS_KEY_ID); channels cannot be used")
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
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Channel, string, error) {
		return h.svc.List(r.Context(), r.PathValue("botID"), limit, cursor)
	})
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
	if name := strings.TrimSpace(req.Name); len([]rune(name)) > 100 {
		p.Add("name", "must be at most 100 characters")
	} else {
		p.Text("name", name, text.Name)
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
		return credentialsProblems(err)
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

// credentialsProblems turns the credential errors a credentials value's Validate returns
// (one, or several joined) into one 400 validation_failed listing them; other errors (of
// decoding) pass through.
func credentialsProblems(err error) error {
	var p httpapi.Problems
	var walk func(error) bool
	walk = func(err error) bool {
		if ce, ok := err.(*channel.CredentialsError); ok {
			p.Add("credentials."+ce.Field, "%s", ce.Message)
			return true
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			all := true
			for _, e := range j.Unwrap() {
				all = walk(e) && all
			}
			return all
		}
		return false
	}
	if walk(err) && len(p) > 0 {
		return p.Err()
	}
	return err
}

func (h *Handlers) disconnect(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.Disconnect(r.Context(), r.PathValue("botID"), r.PathValue("channelID")); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}
