// Command lambda serves the public routes (the OpenAPI document, the health check) on AWS
// Lambda behind API Gateway. It needs no AWS permission.
package main

import (
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/apigw"
)

func main() {
	log := platform.Logger(os.Stderr)
	mux, err := platform.PublicMux(log, time.Now)
	if err != nil {
		log.Error("start", "error", err)
		os.Exit(1)
	}
	lambda.Start(apigw.Handler(mux))
}
