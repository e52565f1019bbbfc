// Command lambda is the shared API Gateway authorizer on AWS Lambda.
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botplatform/api/functions/authorizer"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/auth"
)

func main() {
	log := platform.Logger(os.Stderr)
	a, err := platform.LoadAWS(context.Background(), platform.AWSConfigFromEnv(), log)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	st, err := a.Store()
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	// No principal cache here: API Gateway caches this function's answers already, and a
	// second cache would stretch how long a revoked token keeps working.
	lambda.Start(authorizer.Handler(auth.NewService(st, time.Now, log, auth.WithCacheTTL(0)), log))
}
