package families

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each Lambda links the kernel, its own family and what that family's code calls, not every
// family: a binary holds only code it may run, and cold-starts only what it needs. This is
// the table of what each Lambda may link beyond shared/..., with the reason for every edge
// to another family; a new import that pulls a family in fails here until it is added with
// its reason.
func TestEachLambdaLinksItsFamily(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	t.Parallel()
	// Every Lambda built on functions/platform links it and what it imports: bots (the
	// tenancy check of every {botID} route), authorizer (its Lambda's handler), public
	// (the public Lambda's mux). All three are small and import only the kernel.
	base := []string{"platform", "bots", "authorizer", "public"}
	allowed := map[string][]string{
		"public":      nil,
		"pats":        {"pats"},
		"auditlog":    {"auditlog"},
		"requestlogs": {"requestlogs"},
		"stats":       {"stats"},
		"collections": {"collections"},
		"channels":    {"channels"},
		// Deleting a bot deletes its channels in the same transaction.
		"bots": {"bots/wiring", "channels"},
		// Publishing checks labels and fields (subscribers), the template catalog and the
		// connected channels (channels); an import creates labels and fields.
		"reactions": {"reactions", "reactions/wiring", "subscribers", "channels"},
		// Labels added over the API start label_added reactions: the runtime's message.
		"subscribers": {"subscribers", "subscribers/wiring", "runtime"},
		// A delivery is for a channel, verified with its secret; template status updates
		// go to the channels family's catalog; WhatsApp's delivery statuses are counted in
		// broadcast reports (broadcasts: RecordDeliveries, which needs only the store).
		"webhooks": {"webhooks", "webhooks/wiring", "channels", "broadcasts"},
		// The traces read subscribers; the runtime family's queue handlers (which run in
		// the jobs Lambda, composed in the same package) drive channels, subscribers and
		// published reactions.
		"runtime": {"runtime", "runtime/wiring", "reactions", "reactions/wiring", "subscribers", "channels"},
		// Merge fields are the bot's subscriber fields and test recipients its subscribers
		// (subscribers); a test send of a message goes out on the bot's channel (channels).
		"content": {"content", "content/wiring", "subscribers", "channels"},
		// A popup's form fields are the bot's custom fields, and the answers are written to a
		// subscriber (subscribers).
		"popups": {"popups", "popups/wiring", "subscribers"},
		// CRM mappings and previews read the bot's subscriber fields, labels and subscribers
		// (subscribers); the provider clients are in shared/crm.
		"crm": {"crm", "crm/wiring", "subscribers", "runtime"},
		// Attaching a WhatsApp number connects a channel through the channels family in
		// process.
		"meta": {"meta", "meta/wiring", "channels"},
		// The customer SDK's management routes link nothing else.
		"customersdk": {"customersdk", "customersdk/wiring"},
		// The device surface serves the customer SDK's data (customersdk) and browser push's
		// VAPID public key (webpush, which reads published push documents: content).
		"sdk": {"sdk", "sdk/wiring", "customersdk", "customersdk/wiring", "webpush", "webpush/wiring", "content"},
		// Sending domains: forwards of inbound mail go out through the email sender (no family).
		// A route's reaction action runs for the sender's subscriber: it finds or creates that
		// subscriber (subscribers), checks that the reaction is published (reactions: its
		// published list only) and stages the runtime's message that starts the run (runtime:
		// RunReactionMessage, as the subscribers Lambda stages LabelAddedMessage).
		"emaildomains": {"emaildomains", "emaildomains/wiring", "emaildomains/internal/mimemail", "subscribers", "reactions", "runtime"},
		// A campaign sends a published email (content and its wiring: subscribers, channels),
		// to an audience (subscribers), signed with a verified domain's key (emaildomains),
		// skipping suppressed addresses (emailevents). The sending domains' wiring, which
		// builds the signers, also composes inbound routes' reactions (reactions, runtime).
		"emailcampaigns": {"emailcampaigns", "emailcampaigns/wiring", "content", "content/wiring", "subscribers", "channels",
			"emaildomains", "emaildomains/wiring", "emaildomains/internal/mimemail", "emailevents", "reactions", "runtime"},
		// Opens, clicks, unsubscribes and provider events are about campaign recipients
		// (reactions and runtime come with the sending domains' wiring, as for campaigns).
		"emailevents": {"emailevents", "emailevents/wiring", "emailcampaigns", "emailcampaigns/wiring", "content", "content/wiring",
			"subscribers", "channels", "emaildomains", "emaildomains/wiring", "emaildomains/internal/mimemail", "reactions", "runtime"},
		// A custom event's subscriber must be the bot's, and its channel is the subscriber's
		// (subscribers: Get).
		"events": {"events", "events/wiring", "subscribers"},
		// Managed AI calls the providers through their clients (shared/ai) only.
		"ai": {"ai", "ai/wiring"},
		// Flow intelligence reads reaction versions (reactions and the wiring that builds its
		// service: subscribers for the vocabulary, channels for its readers) and the
		// runtime's traces (runtime: Traces, FlowWrites).
		"flowintel": {"flowintel", "flowintel/wiring", "reactions", "reactions/wiring", "subscribers", "channels", "runtime"},
		// Replay reads the runtime's traces and simulates with its simulator (runtime), and
		// reads reactions' versions and drafts (reactions, built by its wiring, which reads
		// the bot's labels and fields: subscribers, channels).
		"replay": {"replay", "replay/wiring", "runtime", "reactions", "reactions/wiring", "subscribers", "channels"},
		// Copilot proposals: the reactions family's drafts, validation and updates (reactions
		// and the wiring that builds its service: subscribers, channels), the runtime's
		// simulator (runtime), the account's bots (bots) and managed AI in process (ai and
		// the wiring that builds it from the same configuration).
		"copilot": {"copilot", "copilot/wiring", "reactions", "reactions/wiring", "subscribers", "channels", "runtime",
			"bots", "ai", "ai/wiring"},
		// A funnel's cohort is saved as a segment (segments: its Save).
		"funnels": {"funnels", "funnels/wiring", "segments"},
		// Playbook installs create through the families that own each resource, in process:
		// labels and fields (subscribers), content documents (content and the wiring that
		// builds its service), popups (popups and its wiring's custom fields), collections,
		// reactions (and the wiring that builds its service: channels for its readers) and
		// the bot's channels (channels).
		"playbooks": {"playbooks", "playbooks/catalog", "playbooks/wiring", "subscribers", "content", "content/wiring", "popups", "popups/wiring",
			"collections", "reactions", "reactions/wiring", "channels"},
		// Onboarding recommends from the playbook catalog (data, not the playbooks service)
		// and checks an install id through its wiring (playbooks.InstallState; the playbooks
		// package links no other family).
		"onboarding": {"onboarding", "onboarding/wiring", "playbooks", "playbooks/catalog"},
		// A segment is stale once the funnel or experiment it was computed from changed
		// (funnels: the definition's revision; experiments: the version).
		"segments": {"segments", "segments/wiring", "funnels", "experiments"},
		// A variant's subject is a reaction version, a content document or a popup (their
		// services, for reads); only subscribers are assigned (subscribers); a cohort is
		// saved as a segment (segments: its Save).
		"experiments": {"experiments", "experiments/wiring", "reactions", "content", "popups", "subscribers", "segments"},
		// A broadcast sends published messages (content), to an audience (subscribers, a
		// saved segment: segments and the staleness look-ups of its wiring, funnels and
		// experiments; an experiment's status: experiments), over the bot's channels; a
		// legacy broadcast runs a published reaction (reactions) for each recipient (runtime:
		// its direct-run message).
		"broadcasts": {"broadcasts", "broadcasts/wiring", "content", "subscribers", "channels", "segments", "segments/wiring", "funnels", "experiments",
			"reactions", "runtime"},
		// The MCP server serves the tools of the families listed in mcp/wiring, built as
		// those families build them (their wiring, and what it links: channels for the bots'
		// deletion, the runtime for labels added, reactions' subscriber vocabulary; the
		// broadcasts service with what its wiring composes, as the broadcasts Lambda links it;
		// the CRM service with its wiring, as the crm Lambda links it: the CRM reads call the
		// provider clients, in shared/crm).
		"mcp": {"mcp", "mcp/wiring", "bots/wiring", "channels", "reactions", "reactions/wiring",
			"subscribers", "subscribers/wiring", "runtime",
			"broadcasts", "broadcasts/wiring", "content", "segments", "segments/wiring", "funnels", "experiments",
			"crm", "crm/wiring", "replay", "replay/wiring", "flowintel", "flowintel/wiring",
			"copilot", "copilot/wiring", "bots", "ai", "ai/wiring",
			"playbooks", "playbooks/catalog", "playbooks/wiring", "collections", "content/wiring", "popups", "popups/wiring"},
		// Browser push reads and expires the customer SDK's web push subscriptions
		// (customersdk and the wiring that builds its service) and sends published push
		// documents (content: Published only).
		"webpush":    {"webpush", "webpush/wiring", "customersdk", "customersdk/wiring", "content"},
		"authorizer": nil,
		"auditsink":  nil,
	}
	for _, name := range append(namesOf(), Workers()...) {
		if name == "jobs" {
			continue // runs every family's jobs: it links them all, through this package
		}
		want, ok := allowed[name]
		require.True(t, ok, "no row for the %s Lambda", name)
		want = append(slices.Clone(base), want...)
		out, err := exec.Command("go", "list", "-deps", "github.com/botplatform/api/functions/"+name+"/lambda").Output()
		require.NoError(t, err)
		for _, dep := range strings.Fields(string(out)) {
			fam, ok := strings.CutPrefix(dep, "github.com/botplatform/api/functions/")
			if !ok || fam == name+"/lambda" {
				continue
			}
			assert.Contains(t, want, fam, "the %s Lambda links functions/%s", name, fam)
		}
	}
}

func namesOf() []string {
	var out []string
	for _, f := range All() {
		out = append(out, f.Name)
	}
	return out
}
