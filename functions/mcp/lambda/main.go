// Command lambda serves the MCP endpoint (POST /mcp) on AWS Lambda behind API Gateway and
// the shared authorizer, with the tools of the families it composes for them.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botplatform/api/functions/mcp"
	mcpwiring "github.com/botplatform/api/functions/mcp/wiring"
	"github.com/botplatform/api/functions/platform"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), mcp.Family(), log, mcpwiring.Served()...)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
