// Command lambda serves the playbooks route family on AWS Lambda behind API Gateway.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botplatform/api/functions/platform"
	playbookswiring "github.com/botplatform/api/functions/playbooks/wiring"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), playbookswiring.Family(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
