// Command infra is the CDK app of the bot platform. `make synth` runs it directly
// (CDK_OUTDIR=cdk.out go run ./infra) and the CDK CLI runs it through cdk.json; neither
// needs AWS credentials to synthesize, since the stack is environment-agnostic and looks
// nothing up. Configuration is CDK context: see stack.Config and the README.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/botplatform/api/infra/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	defer jsii.Close()
	// A jsii call that fails panics; report it like any other error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("synthesis failed: %v", r)
		}
	}()
	app := awscdk.NewApp(nil)
	cfg, err := stack.ConfigFrom(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err != nil {
		return errors.Join(err, cfg.Validate()) // every problem at once
	}
	if _, err := stack.New(app, "BotPlatform-"+cfg.Stage, cfg); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}
