package subscribers

import (
	"context"
	"net/url"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the subscribers family's MCP tools: the reads of GET .../subscribers and GET
// .../subscribers/{subscriberID}, with those routes' access (subscribers:read and the
// Dialogs right: subscribers are people's data) and answers.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	read := httpapi.Need("subscribers:read", auth.RightDialogs)
	return []mcptool.Tool{
		mcptool.New("list_subscribers", "List a bot's subscribers (the people who talk to it on its channels), oldest first: "+
			"each one's id, channel, profile, labels and custom field values. Filters: label, channel, external_id "+
			"(with channel), q (search in names), created_from and created_to.",
			read, func(ctx context.Context, in listArgs) (any, error) {
				q := in.query()
				f, err := parseFilter(q)
				if err != nil {
					return nil, err
				}
				path := "/api/bots/" + url.PathEscape(in.BotID) + "/subscribers"
				return mcptool.List(ctx, cursors, path, q, in.Page, func(limit int, cursor string) ([]Subscriber, string, error) {
					return svc.List(ctx, in.BotID, f, limit, cursor)
				})
			}).Mirroring("GET /api/bots/{botID}/subscribers"),
		mcptool.New("get_subscriber", "Get one subscriber of a bot: channel and external id, profile, labels, custom field values, "+
			"last seen time and revision.",
			read, func(ctx context.Context, in getArgs) (any, error) {
				return svc.Get(ctx, in.BotID, in.SubscriberID)
			}).Mirroring("GET /api/bots/{botID}/subscribers/{subscriberID}"),
	}
}

type listArgs struct {
	mcptool.Bot
	mcptool.Page
	Label       *string `json:"label,omitempty" jsonschema:"keep the subscribers with this label (lbl_...)"`
	Channel     *string `json:"channel,omitempty" jsonschema:"keep the subscribers of this channel: telegram, whatsapp, vk, web or email"`
	ExternalID  *string `json:"external_id,omitempty" jsonschema:"the subscriber's id on its channel (needs channel)"`
	Q           *string `json:"q,omitempty" jsonschema:"search in first and last names (at most 100 characters)"`
	CreatedFrom *string `json:"created_from,omitempty" jsonschema:"keep the subscribers created at or after this RFC 3339 time"`
	CreatedTo   *string `json:"created_to,omitempty" jsonschema:"keep the subscribers created before this RFC 3339 time"`
}

// query is the filters as the REST list takes them: parsed by the same code, and what its
// cursors are bound to.
func (a listArgs) query() url.Values {
	q := url.Values{}
	for name, v := range map[string]*string{"label": a.Label, "channel": a.Channel, "external_id": a.ExternalID,
		"q": a.Q, "created_from": a.CreatedFrom, "created_to": a.CreatedTo} {
		if v != nil {
			q.Set(name, *v)
		}
	}
	return q
}

type getArgs struct {
	mcptool.Bot
	SubscriberID string `json:"subscriber_id" jsonschema:"the subscriber's id (sub_...), as list_subscribers returns it"`
}

// Validate requires the subscriber.
func (a *getArgs) Validate() error {
	var p httpapi.Problems
	p.Require("subscriber_id", a.SubscriberID)
	return p.Err()
}
