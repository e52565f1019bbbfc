// Command lambda stores the audit events an EventBridge rule delivers from the audit bus.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/audit/eventbridge"
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
	sink, err := eventbridge.NewSink(audit.NewLog(st), eventbridge.DefaultSource)
	if err != nil {
		log.Error("cold start failed", "error", err)
		os.Exit(1)
	}
	lambda.Start(sink.Handle)
}
