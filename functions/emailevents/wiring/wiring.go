// Package wiring composes the email events family (tracking, unsubscribe, provider
// webhooks, suppressions) with the campaigns whose recipients the events are about.
package wiring

import (
	"context"

	"github.com/botplatform/api/functions/emailcampaigns"
	campaignswiring "github.com/botplatform/api/functions/emailcampaigns/wiring"
	"github.com/botplatform/api/functions/emailevents"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/sns"
)

// Family is the emailevents family.
func Family() family.Family {
	return family.Family{Name: "emailevents", Build: func(env *family.Env) family.Parts {
		var recorder emailevents.Campaigns
		if c, err := campaignswiring.New(env); err == nil {
			recorder = campaigns{c}
		} else {
			// Without campaigns, events are verified and answered, and change nothing.
			env.Log.Warn("email events are not recorded", "error", err)
		}
		svc := emailevents.NewService(env.Store, env.Links, recorder, emailevents.Config{
			// Without topics every SES delivery is refused.
			SNS:               sns.New(sns.Config{Topics: env.EmailSettings.SNSTopicARNs, Now: env.Now}),
			MailgunSigningKey: env.EmailSettings.MailgunSigningKey,
		}, env.Now, env.Log)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) {
				emailevents.Routes(mux, svc, env.Cursors)
				emailevents.PublicRoutes(mux, svc)
			},
			Purge: emailevents.PurgeStep(env.Store),
		}
	}}
}

// campaigns adapts the campaigns service to what events need of it.
type campaigns struct{ svc *emailcampaigns.Service }

func (c campaigns) LinkTarget(ctx context.Context, ref emaillinks.Ref) (string, error) {
	return c.svc.LinkTarget(ctx, ref)
}

func (c campaigns) Record(ctx context.Context, ref emaillinks.Ref, ev emailevents.Event) error {
	return c.svc.Record(ctx, ref, emailcampaigns.Event(ev))
}

func (c campaigns) ByMessageID(ctx context.Context, id string) (emaillinks.Ref, error) {
	return c.svc.ByMessageID(ctx, id)
}

func (c campaigns) Recipient(ctx context.Context, ref emaillinks.Ref) (string, error) {
	return c.svc.Recipient(ctx, ref)
}
