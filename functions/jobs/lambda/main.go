// Command lambda runs background job steps on AWS: batches from the jobs queue, and single
// steps for the long-jobs state machine.
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/functions/platform"
)

func main() {
	log := platform.Logger(os.Stderr)
	h, err := platform.JobsLambda(context.Background(), log, time.Now, families.All())
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
