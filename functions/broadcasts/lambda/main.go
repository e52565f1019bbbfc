// Command lambda serves the broadcasts route family on AWS Lambda behind API Gateway.
package main

import (
	"context"
	"os"

	broadcastswiring "github.com/botplatform/api/functions/broadcasts/wiring"
	"github.com/botplatform/api/functions/platform"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), broadcastswiring.Family(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
