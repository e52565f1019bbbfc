// Package sfn starts jobs as executions of the Step Functions state machine that drives
// their steps on AWS (infra/ defines it: invoke the jobs Lambda with the State, loop until
// "done"). Use it for jobs that may run longer than a queue's retry window tolerates.
package sfn

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
)

// Starter implements jobs.Starter with StartExecution.
type Starter struct {
	client       *sfn.Client
	stateMachine string
	known        func(kind string) bool
}

// NewStarter returns a Starter for the state machine ARN. known reports whether a kind has
// a step, so a typo fails at Start and not inside an execution.
func NewStarter(client *sfn.Client, stateMachineARN string, known func(kind string) bool) *Starter {
	return &Starter{client: client, stateMachine: stateMachineARN, known: known}
}

// Start begins an execution whose input is the job's first State. The execution name is a
// fresh id (names must be unique per state machine), prefixed with the kind for operators.
func (s *Starter) Start(ctx context.Context, kind string, payload any) error {
	if !s.known(kind) {
		return fmt.Errorf("%w %q", jobs.ErrUnknownKind, kind)
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("sfn: encode %s payload: %w", kind, err)
	}
	input, err := json.Marshal(jobs.State{Kind: kind, Payload: p})
	if err != nil {
		return err
	}
	_, err = s.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(s.stateMachine),
		Name:            aws.String(executionName(kind)),
		Input:           aws.String(string(input)),
	})
	if err != nil {
		return fmt.Errorf("sfn: start %s: %w", kind, err)
	}
	return nil
}

// executionName keeps to Step Functions' rules: at most 80 characters of letters, digits,
// '-' and '_'.
func executionName(kind string) string {
	name := []byte(kind)
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			name[i] = '-'
		}
	}
	id := ids.New("x")[2:] // 26 time-ordered characters
	if len(name) > 80-1-len(id) {
		name = name[:80-1-len(id)]
	}
	return string(name) + "-" + id
}
