// Command lambda serves the events route family (custom events, the event list and its
// counts) on AWS Lambda behind API Gateway.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	eventswiring "github.com/botplatform/api/functions/events/wiring"
	"github.com/botplatform/api/functions/platform"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), eventswiring.Family(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
