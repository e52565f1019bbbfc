// Command lambda serves the meta route family (Meta connections and the Facebook Login
// callback) on AWS Lambda behind API Gateway.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	metawiring "github.com/botplatform/api/functions/meta/wiring"
	"github.com/botplatform/api/functions/platform"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.FamilyHandler(context.Background(), metawiring.Family(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
