package meta

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/text"
)

// attachAccess is what attaching needs on the target bot: what POST
// /api/bots/{botID}/channels needs (bots:write and the Reactions right), checked by the
// service once the bot is known, exactly as that route's kernel check would be.
var attachAccess = httpapi.Need("bots:write", auth.RightReactions)

// AttachRequest is the body of POST .../attachments.
type AttachRequest struct {
	AssetID string `json:"asset_id"`
	BotID   string `json:"bot_id"`
	// Name is the channel's name (default: the number as WhatsApp displays it).
	Name string `json:"name"`
}

// Validate checks the body's shape.
func (r *AttachRequest) Validate() error {
	var p httpapi.Problems
	p.Require("asset_id", r.AssetID)
	p.Require("bot_id", r.BotID)
	if name := strings.TrimSpace(r.Name); len([]rune(name)) > 100 {
		p.Add("name", "must be at most 100 characters")
	} else {
		p.Text("name", name, text.Name)
	}
	return p.Err()
}

// notActive is the 409 of a route that needs an active connection; the connection's status
// travels as `state` (the problem's own `status` is the HTTP status).
func notActive(status string) error {
	return httpapi.Errorf(httpapi.KindConflict, "connection_not_active", "the connection is %s, not active: connect again", status).
		With("state", status)
}

// Attach connects a selected asset of the connection to a bot as a channel, through the
// channels family (its adapter checks the credentials with the provider and seals them),
// and records the attachment on the asset. Only WhatsApp phone numbers can be attached:
// the platform has no Messenger or Instagram channel adapter (422 channel_kind_unsupported).
func (s *Service) Attach(ctx context.Context, p *auth.Principal, id string, req AttachRequest) (channels.Channel, error) {
	account := p.AccountID
	rec, err := s.load(ctx, account, id)
	if err != nil {
		return channels.Channel{}, err
	}
	// The bot first: another account's is 404 whatever else is wrong, a missing right 403.
	if !ids.Valid("bot", req.BotID) {
		return channels.Channel{}, httpapi.NotFound("bot")
	}
	if _, err := httpapi.Authorize(ctx, s.bots, attachAccess, p, true, req.BotID); err != nil {
		return channels.Channel{}, err
	}
	if v := s.view(rec); v.Status != StatusActive {
		return channels.Channel{}, notActive(v.Status)
	}
	ar, _, err := s.loadAssets(ctx, account, id)
	if err != nil {
		return channels.Channel{}, err
	}
	i := slices.IndexFunc(ar.Assets, func(a Asset) bool { return a.ID == req.AssetID })
	if i < 0 || ar.Assets[i].Gone {
		var pr httpapi.Problems
		pr.Add("asset_id", "is not an asset of this connection (GET .../assets lists them)")
		return channels.Channel{}, pr.Err()
	}
	a := ar.Assets[i]
	switch a.Kind {
	case KindPhone:
	case KindWABA:
		return channels.Channel{}, httpapi.E(httpapi.KindUnprocessable, "channel_kind_unsupported",
			"a WhatsApp Business account is not a channel: attach one of its phone numbers").With("kind", a.Kind)
	default:
		return channels.Channel{}, httpapi.Errorf(httpapi.KindUnprocessable, "channel_kind_unsupported",
			"the platform has no channel for a %s (no Messenger or Instagram adapter); only WhatsApp phone numbers can be attached", a.Kind).
			With("kind", a.Kind)
	}
	if !a.Selected {
		return channels.Channel{}, httpapi.E(httpapi.KindConflict, "asset_not_selected",
			"select the asset first (PUT .../selection)").With("asset_id", a.ID)
	}
	if s.channels == nil {
		return channels.Channel{}, httpapi.E(httpapi.KindUnavailable, "channels_unavailable",
			"this deployment holds no key to seal channel credentials with; channels cannot be attached")
	}
	if a.ChannelID != "" {
		// Attached, unless its channel is gone since (disconnected, or its bot deleted):
		// then the asset is free again.
		_, err := s.channels.Get(ctx, a.BotID, a.ChannelID)
		if httpapi.KindOf(err) != httpapi.KindNotFound {
			return channels.Channel{}, httpapi.E(httpapi.KindConflict, "asset_attached",
				"the asset is attached already; disconnect its channel first").With("channel_id", a.ChannelID)
		}
	}
	if _, ok := s.channels.Adapter(channel.WhatsApp); !ok {
		return channels.Channel{}, httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "this deployment has no whatsapp adapter")
	}
	waba := strings.TrimPrefix(a.ParentID, idPrefixes[KindWABA]+":")
	tok, _, tokRev, err := s.token(ctx, account, id)
	if err != nil {
		return channels.Channel{}, err
	}
	ch, err := s.channels.Connect(ctx, account, req.BotID, channel.WhatsApp, req.Name,
		&whatsapp.Credentials{AccessToken: tok, PhoneNumberID: a.GraphID, BusinessAccountID: waba})
	if errors.Is(err, channels.ErrUnknownType) {
		return channels.Channel{}, httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "this deployment has no whatsapp adapter")
	}
	if err != nil {
		return channels.Channel{}, err
	}
	if _, _, err := s.saveAssets(ctx, account, id, func(ar *assetsRecord) {
		for j := range ar.Assets {
			if ar.Assets[j].ID == a.ID {
				ar.Assets[j].ChannelID, ar.Assets[j].BotID = ch.ID, ch.BotID
				if ar.ChannelTokens == nil {
					ar.ChannelTokens = map[string]int64{}
				}
				ar.ChannelTokens[a.ID] = tokRev
			}
		}
	}); errors.Is(err, errNoAssets) {
		// The connection was deleted while the channel was being connected: its deletion
		// revokes the token the channel holds, so the channel is undone, and the attachment
		// answers 404, as for any connection that is gone.
		if err := s.channels.Disconnect(context.WithoutCancel(ctx), ch.BotID, ch.ID); err != nil {
			s.log.WarnContext(ctx, "meta: disconnect the channel of a connection deleted while attaching", "connection", id,
				"channel", ch.ID, "error", err)
		}
		return channels.Channel{}, notFound()
	} else if err != nil {
		// The channel exists either way: it is the bot's, listed with its channels.
		s.log.WarnContext(ctx, "meta: record attachment", "connection", id, "asset", a.ID, "channel", ch.ID, "error", err)
	}
	return ch, nil
}
