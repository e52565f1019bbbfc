// Command lambda serves the sdk route family (the customer SDK's device surface /sdk/v1/*, its OpenAPI document and scripts) on AWS Lambda behind API Gateway.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botplatform/api/functions/platform"
	sdkwiring "github.com/botplatform/api/functions/sdk/wiring"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), sdkwiring.Family(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
