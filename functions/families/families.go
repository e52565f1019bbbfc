// Package families lists every route family of the API. The processes that run them all
// import it: the local process, the jobs Lambda (every family's jobs, queue handlers and bot
// purge steps), the CDK app (a route per documented operation, to the Lambda of its
// family). A family's own Lambda imports only its family (functions/<name>/lambda).
package families

import (
	"fmt"
	"slices"

	aiwiring "github.com/botplatform/api/functions/ai/wiring"
	"github.com/botplatform/api/functions/auditlog"
	botswiring "github.com/botplatform/api/functions/bots/wiring"
	broadcastswiring "github.com/botplatform/api/functions/broadcasts/wiring"
	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/collections"
	contentwiring "github.com/botplatform/api/functions/content/wiring"
	copilotwiring "github.com/botplatform/api/functions/copilot/wiring"
	crmwiring "github.com/botplatform/api/functions/crm/wiring"
	customersdkwiring "github.com/botplatform/api/functions/customersdk/wiring"
	emailcampaignswiring "github.com/botplatform/api/functions/emailcampaigns/wiring"
	emaildomainswiring "github.com/botplatform/api/functions/emaildomains/wiring"
	emaileventswiring "github.com/botplatform/api/functions/emailevents/wiring"
	eventswiring "github.com/botplatform/api/functions/events/wiring"
	experimentswiring "github.com/botplatform/api/functions/experiments/wiring"
	flowintelwiring "github.com/botplatform/api/functions/flowintel/wiring"
	funnelswiring "github.com/botplatform/api/functions/funnels/wiring"
	"github.com/botplatform/api/functions/mcp"
	metawiring "github.com/botplatform/api/functions/meta/wiring"
	onboardingwiring "github.com/botplatform/api/functions/onboarding/wiring"
	"github.com/botplatform/api/functions/pats"
	playbookswiring "github.com/botplatform/api/functions/playbooks/wiring"
	popupswiring "github.com/botplatform/api/functions/popups/wiring"
	"github.com/botplatform/api/functions/public"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	replaywiring "github.com/botplatform/api/functions/replay/wiring"
	"github.com/botplatform/api/functions/requestlogs"
	runtimewiring "github.com/botplatform/api/functions/runtime/wiring"
	sdkwiring "github.com/botplatform/api/functions/sdk/wiring"
	segmentswiring "github.com/botplatform/api/functions/segments/wiring"
	"github.com/botplatform/api/functions/stats"
	subscriberswiring "github.com/botplatform/api/functions/subscribers/wiring"
	webhookswiring "github.com/botplatform/api/functions/webhooks/wiring"
	webpushwiring "github.com/botplatform/api/functions/webpush/wiring"
	"github.com/botplatform/api/shared/family"
)

// All lists every route family. Adding a family here serves it locally, runs its jobs in the
// jobs Lambda and, through the OpenAPI document, routes its operations to its Lambda
// (functions/<name>/lambda, whose main composes the family alone).
func All() []family.Family {
	return []family.Family{
		public.Family(),
		pats.Family(),
		botswiring.Family(),
		auditlog.Family(),
		requestlogs.Family(),
		collections.Family(),
		reactionswiring.Family(),
		stats.Family(),
		subscriberswiring.Family(),
		channels.Family(),
		webhookswiring.Family(),
		runtimewiring.Family(),
		contentwiring.Family(),
		popupswiring.Family(),
		emaildomainswiring.Family(),
		emailcampaignswiring.Family(),
		emaileventswiring.Family(),
		eventswiring.Family(),
		funnelswiring.Family(),
		flowintelwiring.Family(),
		segmentswiring.Family(),
		experimentswiring.Family(),
		broadcastswiring.Family(),
		customersdkwiring.Family(),
		sdkwiring.Family(),
		webpushwiring.Family(),
		crmwiring.Family(),
		metawiring.Family(),
		aiwiring.Family(),
		copilotwiring.Family(),
		replaywiring.Family(),
		playbookswiring.Family(),
		onboardingwiring.Family(),
		mcp.Family(),
	}
}

// Named returns the family called name.
func Named(name string) (family.Family, error) {
	all := All()
	i := slices.IndexFunc(all, func(f family.Family) bool { return f.Name == name })
	if i < 0 {
		return family.Family{}, fmt.Errorf("families: no family %q", name)
	}
	return all[i], nil
}

// Workers lists the Lambdas that serve no route of their own: the shared authorizer, the
// audit sink (EventBridge rule target) and the jobs worker (SQS consumer, Step Functions
// task and the outbox's sweep).
func Workers() []string { return []string{"authorizer", "auditsink", "jobs"} }
