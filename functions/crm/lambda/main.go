// Command lambda serves the crm route family (CRM connections and the OAuth callback) on AWS Lambda behind API Gateway.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	crmwiring "github.com/botplatform/api/functions/crm/wiring"
	"github.com/botplatform/api/functions/platform"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), crmwiring.Family(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
