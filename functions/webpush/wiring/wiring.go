// Package wiring composes the browser push family with the process: its sealer, the customer
// SDK's subscriptions (customersdk) and the bots' published push documents (content).
package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/customersdk"
	customersdkwiring "github.com/botplatform/api/functions/customersdk/wiring"
	"github.com/botplatform/api/functions/webpush"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the webpush family: the token API's browser push routes.
func Family() family.Family {
	return family.Family{Name: "webpush", Build: func(env *family.Env) family.Parts {
		svc := Service(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { webpush.Routes(mux, svc, env.Cursors) },
			Purge:  webpush.PurgeStep(env.Store),
		}
	}}
}

// LoopbackEnv names the environment variable that lets the local process send to push
// services on loopback addresses (a push service emulator): "allow" allows them. The Lambda
// environments never set it (infra/stack's environment contract).
const LoopbackEnv = "WEB_PUSH_LOOPBACK_ENDPOINTS"

// OptionsFromEnv reads the push options from the environment (LoopbackEnv).
func OptionsFromEnv(getenv func(string) string) webpush.PushOptions {
	return webpush.PushOptions{AllowLoopback: getenv(LoopbackEnv) == "allow"}
}

// Service builds the browser push service on env with the push options of the environment;
// the device surface (functions/sdk) asks it for a bot's public key (PublicKey).
func Service(env *family.Env) *webpush.Service { return New(env, OptionsFromEnv(os.Getenv)) }

// New builds the browser push service on env with opts; the device surface (functions/sdk) asks it for
// a bot's public key (Service.PublicKey).
func New(env *family.Env, opts webpush.PushOptions) *webpush.Service {
	sealer := env.Secrets
	if sealer == nil {
		sealer = noSealer{}
	}
	svc, err := webpush.New(webpush.Config{
		Store:         env.Store,
		Sealer:        sealer,
		Subscriptions: Subscriptions{SDK: customersdkwiring.Service(env)},
		// Published reads only: no catalog, no test sender.
		Content: Content{Docs: content.NewService(env.Store, nil, nil, env.Now)},
		Push:    webpush.NewPusher(opts),
		Limiter: ratelimit.New(env.Store, env.Now),
		Log:     env.Log,
		Now:     env.Now,
	})
	if err != nil {
		// Every field New checks is set above; a failure here is a programming error.
		panic(err)
	}
	return svc
}

// noSealer stands in for a process without a credentials key: browser push cannot be
// enabled (the private key cannot be sealed).
type noSealer struct{}

var errNoSealer = httpapi.E(httpapi.KindUnavailable, "secrets_unavailable", "this deployment holds no key to seal VAPID keys with (SECRETS_KEY_ID on AWS)")

func (noSealer) Seal(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
func (noSealer) Open(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }

// SDK is what browser push uses of the customer SDK's service.
type SDK interface {
	WebPushSubscriptions(ctx context.Context, bot string, limit int, cursor string) ([]customersdk.WebPushSubscription, string, error)
	WebPushTarget(ctx context.Context, bot, subscriptionID string) (endpoint, p256dh, authKey string, err error)
	ExpireWebPush(ctx context.Context, bot, subscriptionID, reason string) error
	ExpireAllWebPush(ctx context.Context, bot string) (int64, error)
	ActiveWebPush(ctx context.Context, bot string) (int64, error)
	Counts(ctx context.Context, bot string) (customersdk.Counts, error)
}

// Subscriptions are the customer SDK's web push subscriptions, as browser push reads them.
type Subscriptions struct{ SDK SDK }

var _ webpush.Subscriptions = Subscriptions{}

// List returns a page of the bot's web push subscriptions.
func (s Subscriptions) List(ctx context.Context, bot string, limit int, cursor string) ([]webpush.Subscription, string, error) {
	page, next, err := s.SDK.WebPushSubscriptions(ctx, bot, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]webpush.Subscription, 0, len(page))
	for _, p := range page {
		out = append(out, webpush.Subscription{ID: p.ID, InstallationID: p.InstallationID, State: string(p.State),
			Consent: string(p.Consent), Browser: p.BrowserFamily, Locale: p.Locale, Timezone: p.Timezone,
			ExpiredReason: p.ExpiryReason, CreatedAt: p.CreatedAt, ExpiredAt: p.ExpiredAt})
	}
	return out, next, nil
}

// Target opens an active subscription's endpoint and keys.
func (s Subscriptions) Target(ctx context.Context, bot, id string) (webpush.Target, error) {
	ep, p256dh, auth, err := s.SDK.WebPushTarget(ctx, bot, id)
	if err != nil {
		return webpush.Target{}, err
	}
	return webpush.Target{Endpoint: ep, P256dh: p256dh, Auth: auth}, nil
}

// Expire expires one subscription.
func (s Subscriptions) Expire(ctx context.Context, bot, id, reason string) error {
	return s.SDK.ExpireWebPush(ctx, bot, id, reason)
}

// ExpireAll expires every active subscription of bot.
func (s Subscriptions) ExpireAll(ctx context.Context, bot string) (int64, error) {
	return s.SDK.ExpireAllWebPush(ctx, bot)
}

// Active counts bot's active subscriptions.
func (s Subscriptions) Active(ctx context.Context, bot string) (int64, error) {
	return s.SDK.ActiveWebPush(ctx, bot)
}

// Counts returns bot's web push subscription and receipt counters.
func (s Subscriptions) Counts(ctx context.Context, bot string) (webpush.SubscriptionCounts, error) {
	c, err := s.SDK.Counts(ctx, bot)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return webpush.SubscriptionCounts{}, nil // no SDK project: nothing subscribed yet
	}
	if err != nil {
		return webpush.SubscriptionCounts{}, err
	}
	var out webpush.SubscriptionCounts
	out.Active, out.Expired = c.PushTokens[customersdk.PushWeb].Active, c.PushTokens[customersdk.PushWeb].Expired
	out.Receipts.Delivered = c.Receipts[customersdk.ReceiptDelivered]
	out.Receipts.Clicked = c.Receipts[customersdk.ReceiptClicked]
	out.Receipts.Closed = c.Receipts[customersdk.ReceiptClosed]
	return out, nil
}

// Docs is what browser push reads of content documents.
type Docs interface {
	Published(ctx context.Context, bot, id string) (content.Type, content.Version, error)
}

// Content reads published push documents.
type Content struct{ Docs Docs }

var _ webpush.Content = Content{}

// Push returns the published version of a push document.
func (c Content) Push(ctx context.Context, bot, id string) (webpush.Message, error) {
	t, v, err := c.Docs.Published(ctx, bot, id)
	if err != nil {
		return webpush.Message{}, err
	}
	if t != content.TypePush {
		return webpush.Message{}, httpapi.Errorf(httpapi.KindUnprocessable, "unsupported_document_type",
			"content document %s is a %s document, not a push", id, t)
	}
	var b content.PushBody
	if err := json.Unmarshal(v.Body, &b); err != nil {
		return webpush.Message{}, fmt.Errorf("webpush wiring: push body of %s: %w", id, err)
	}
	m := webpush.Message{DocumentID: id, Version: v.Number, Title: b.Title, Body: b.Body, Icon: b.Icon, URL: b.URL}
	for _, a := range b.Actions {
		m.Actions = append(m.Actions, webpush.Action{Title: a.Title, URL: a.URL})
	}
	return m, nil
}
