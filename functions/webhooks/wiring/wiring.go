// Package wiring composes the webhooks family with the channels family, which resolves the
// channel a delivery is for and keeps the WhatsApp template catalog, and with the
// broadcasts family, which counts WhatsApp's delivery statuses in its reports.
package wiring

import (
	"context"

	"github.com/botplatform/api/functions/broadcasts"
	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/webhooks"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Family is the webhooks family: the providers' public webhooks. Without a channels service
// (no sealer) no delivery can be verified: they answer 503; template status updates are
// logged and dropped.
func Family() family.Family {
	return family.Family{Name: "webhooks", Build: func(env *family.Env) family.Parts {
		cfg := webhooks.Config{Store: env.Store, Queue: env.Queue, Now: env.Now, Log: env.Log,
			WhatsAppVerifyToken: env.WhatsAppVerifyToken, Deliveries: broadcastDeliveries{env.Store}}
		if svc := channels.FromEnv(env); svc != nil {
			cfg.Channels = webhookChannels{svc}
			cfg.Templates = templateCatalog{svc}
		}
		s, err := webhooks.New(cfg)
		if err != nil {
			panic(err) // Store, Now and Log are always in an Env (NewEnv refuses without them)
		}
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { webhooks.Routes(mux, s) },
			Purge:  webhooks.PurgeStep(env.Store),
		}
	}}
}

// broadcastDeliveries adapts broadcasts.RecordDeliveries to webhooks.Deliveries: it needs
// only the store, so no broadcasts service (and none of what it sends through) is built here.
type broadcastDeliveries struct{ st store.Store }

func (b broadcastDeliveries) MessageStatuses(ctx context.Context, bot string, sts []whatsapp.MessageStatus) error {
	ds := make([]broadcasts.Delivery, 0, len(sts))
	for _, st := range sts {
		var s broadcasts.DeliveryStatus
		switch st.Status {
		case whatsapp.StatusDelivered:
			s = broadcasts.Delivered
		case whatsapp.StatusRead:
			s = broadcasts.Read
		case whatsapp.StatusFailed:
			s = broadcasts.Undeliverable
		default:
			continue
		}
		ds = append(ds, broadcasts.Delivery{MessageID: st.MessageID, Status: s, At: st.At})
	}
	return broadcasts.RecordDeliveries(ctx, b.st, bot, ds)
}

// templateCatalog adapts *channels.Service to webhooks.Templates.
type templateCatalog struct{ svc *channels.Service }

func (t templateCatalog) TemplateStatus(ctx context.Context, s whatsapp.TemplateStatus) error {
	return t.svc.ApplyTemplateStatus(ctx, s)
}

// webhookChannels adapts *channels.Service to webhooks.Channels.
type webhookChannels struct{ svc *channels.Service }

func webhookChannel(r channels.Resolved, err error) (webhooks.Channel, error) {
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return webhooks.Channel{}, webhooks.ErrUnknownChannel
	}
	if err != nil {
		return webhooks.Channel{}, err
	}
	return webhooks.Channel{ID: r.ID, BotID: r.BotID, AccountID: r.AccountID, Kind: r.Type, Conn: r.Conn}, nil
}

func (c webhookChannels) Resolve(ctx context.Context, id string) (webhooks.Channel, error) {
	return webhookChannel(c.svc.Resolve(ctx, id))
}

func (c webhookChannels) ResolveKey(ctx context.Context, k channel.Kind, key string) (webhooks.Channel, error) {
	return webhookChannel(c.svc.ResolveKey(ctx, k, key))
}

func (c webhookChannels) Adapter(k channel.Kind) (channel.Adapter, bool) { return c.svc.Adapter(k) }
