// Command lambda serves the onboarding route family on AWS Lambda behind API Gateway.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	onboardingwiring "github.com/botplatform/api/functions/onboarding/wiring"
	"github.com/botplatform/api/functions/platform"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), onboardingwiring.Family(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
