// Package wiring composes the content family with the families it reads and sends through:
// subscribers (merge fields, test recipients) and channels (test sends of messages).
package wiring

import (
	"context"
	"fmt"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the content family: content documents and templates.
func Family() family.Family {
	return family.Family{Name: "content", Build: func(env *family.Env) family.Parts {
		svc := New(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { content.Routes(mux, svc, env.Cursors) },
			Purge:  content.PurgeStep(env.Store),
		}
	}}
}

// New builds the content service on env, for this family and for the families that send
// published content.
func New(env *family.Env) *content.Service {
	subs := subscribers.NewService(env.Store, env.Now, env.Jobs)
	chans := channels.FromEnv(env)
	sends := &content.TestSender{
		Recipients: recipients{subs},
		Mail:       env.Email,
		Limiter:    ratelimit.New(env.Store, env.Now),
		Now:        env.Now,
	}
	if chans != nil {
		sends.Messenger = messenger{chans}
	}
	return content.NewService(env.Store, catalog{subs: subs, chans: chans, adapters: env.Adapters}, sends, env.Now).
		WithEvents(env.Events, env.Log)
}

// catalog reads a bot's custom fields and connected channels.
type catalog struct {
	subs     *subscribers.Service
	chans    *channels.Service
	adapters []channel.Adapter
}

func (c catalog) Catalog(ctx context.Context, bot string) (content.Catalog, error) {
	fields, err := c.subs.Fields(ctx, bot)
	if err != nil {
		return content.Catalog{}, err
	}
	var out content.Catalog
	for _, f := range fields {
		out.Fields = append(out.Fields, f.Name)
	}
	connected := map[channel.Kind]bool{}
	if c.chans != nil {
		// A bot has at most one channel of each type, so one page holds them all.
		list, _, err := c.chans.List(ctx, bot, 100, "")
		if err != nil {
			return content.Catalog{}, err
		}
		for _, ch := range list {
			connected[ch.Type] = true
		}
	}
	for _, a := range c.adapters {
		if len(connected) == 0 || connected[a.Kind()] {
			out.Channels = append(out.Channels, a.Capabilities())
		}
	}
	return out, nil
}

// recipients finds test recipients among the bot's subscribers.
type recipients struct{ subs *subscribers.Service }

// testerLabel returns the id of the bot's tester label ("" when it has none).
func (r recipients) testerLabel(ctx context.Context, bot string) (string, error) {
	return r.subs.LabelNamed(ctx, bot, content.TesterLabel)
}

func (r recipients) Testers(ctx context.Context, bot string, limit int, cursor string) ([]content.Recipient, string, error) {
	label, err := r.testerLabel(ctx, bot)
	if err != nil || label == "" {
		return []content.Recipient{}, "", err
	}
	list, next, err := r.subs.List(ctx, bot, subscribers.Filter{Label: label}, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]content.Recipient, 0, len(list))
	for _, s := range list {
		out = append(out, recipient(s))
	}
	return out, next, nil
}

func (r recipients) Subscriber(ctx context.Context, bot, id string) (content.Recipient, bool, error) {
	s, err := r.subs.Get(ctx, bot, id)
	if err != nil {
		return content.Recipient{}, false, err
	}
	label, err := r.testerLabel(ctx, bot)
	if err != nil {
		return content.Recipient{}, false, err
	}
	tester := false
	for _, l := range s.Labels {
		tester = tester || (label != "" && l == label)
	}
	return recipient(s), tester, nil
}

func recipient(s subscribers.Subscriber) content.Recipient {
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	r := content.Recipient{ID: s.ID, Name: deref(s.Name), FirstName: deref(s.FirstName), LastName: deref(s.LastName),
		Locale: deref(s.Locale), Timezone: deref(s.Timezone), Channel: s.Channel, ExternalID: s.ExternalID, Fields: s.Fields}
	if e, ok := s.Fields["email"].(string); ok {
		r.Email = e
	}
	return r
}

// messenger sends over the bot's channel of the subscriber's type.
type messenger struct{ chans *channels.Service }

func (m messenger) Send(ctx context.Context, bot, channelType, externalID string, msg channel.Message) (string, error) {
	k := channel.Kind(channelType)
	r, err := m.chans.ResolveBot(ctx, bot, k)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return "", httpapi.Errorf(httpapi.KindUnprocessable, "channel_not_connected", "the bot has no %s channel to send the test on", k)
	}
	if err != nil {
		return "", err
	}
	a, ok := m.chans.Adapter(k)
	if !ok {
		return "", fmt.Errorf("content wiring: no %s adapter in this process", k)
	}
	return a.Send(ctx, r.Conn, externalID, msg)
}
