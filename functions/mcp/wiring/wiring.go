// Package wiring names the families whose MCP tools the MCP Lambda serves. The local process
// composes every family, and so serves every family's tools; the Lambda composes the MCP
// family with these, for their tools alone (family.ToolsOnly), and links only them. A
// family that declares tools is added here (a test holds the two sets equal).
package wiring

import (
	botswiring "github.com/botplatform/api/functions/bots/wiring"
	broadcastswiring "github.com/botplatform/api/functions/broadcasts/wiring"
	copilotwiring "github.com/botplatform/api/functions/copilot/wiring"
	crmwiring "github.com/botplatform/api/functions/crm/wiring"
	flowintelwiring "github.com/botplatform/api/functions/flowintel/wiring"
	playbookswiring "github.com/botplatform/api/functions/playbooks/wiring"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	replaywiring "github.com/botplatform/api/functions/replay/wiring"
	subscriberswiring "github.com/botplatform/api/functions/subscribers/wiring"
	"github.com/botplatform/api/shared/family"
)

// Served lists the families whose tools the MCP Lambda serves.
func Served() []family.Family {
	return []family.Family{
		botswiring.Family(),
		broadcastswiring.Family(),
		copilotwiring.Family(),
		crmwiring.Family(),
		flowintelwiring.Family(),
		playbookswiring.Family(),
		reactionswiring.Family(),
		replaywiring.Family(),
		subscriberswiring.Family(),
	}
}
