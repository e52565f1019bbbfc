package mcp_test

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the mcp Lambda (infra/access).
//
// No accesstest.KMSComplete here: this package is the MCP server alone, which holds no
// sealer, and these tests serve test tools. The Lambda's grant on the secrets key (under the
// CRM purpose: the CRM read tools open, refresh and seal a connection's credentials) is
// used by the tools functions/mcp/wiring composes, and is held to exactly those uses there
// (its TestMain declares KMSComplete; TestCRMToolsInTheLambda makes them).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "mcp")) }
