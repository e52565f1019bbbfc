// Package wiring names the families whose MCP tools the MCP Lambda serves. The local process
// composes every family, and so serves every family's tools; the Lambda composes the MCP
// family with these, for their tools alone (family.ToolsOnly), and links only them. A
// family that declares tools is added here (a test holds the two sets equal).
package wiring

import (
	botswiring "github.com/botplatform/api/functions/bots/wiring"
	broadcastswiring "github.com/botplatform/api/functions/broadcasts/wiring"
	crmwiring "github.com/botplatform/api/functions/crm/wiring"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	subscriberswiring "github.com/botplatform/api/functions/subscribers/wiring"
	"github.com/botplatform/api/shared/family"
)

// Served lists the families whose tools the MCP Lambda serves.
func Served() []family.Family {
	return []family.Family{
		botswiring.Family(),
		broadcastswiring.Family(),
		crmwiring.Family(),
		reactionswiring.Family(),
		subscriberswiring.Family(),
	}
}
