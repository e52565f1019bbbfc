package awsfake_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/jobs/sfn"
)

// The SDK's own Step Functions client gets through the fake's checks (AWS JSON 1.0,
// AWSStepFunctions.StartExecution, signed for states), the platform's starter
// (shared/jobs/sfn) starts a job's execution on it, and the service's refusals come back as
// the SDK's typed errors.
func TestStateMachinesSpeakStepFunctions(t *testing.T) {
	t.Parallel()
	const (
		machine = "arn:aws:states:us-east-1:123456789012:stateMachine:boot-jobs"
		other   = "arn:aws:states:us-east-1:123456789012:stateMachine:nobody"
	)
	fake := awsfake.StateMachines(t, machine)
	c := awssfn.NewFromConfig(fake.Config())
	ctx := context.Background()

	// The platform's starter: one execution whose input is the job's first State.
	starter := sfn.NewStarter(c, machine, func(kind string) bool { return kind == "crm.sync" })
	require.NoError(t, starter.Start(ctx, "crm.sync", map[string]string{"job_id": "job_1"}))
	execs := fake.Executions()
	require.Len(t, execs, 1)
	assert.Equal(t, machine, execs[0].StateMachineArn)
	assert.True(t, strings.HasPrefix(execs[0].Name, "crm-sync-"), execs[0].Name)
	assert.Equal(t, "arn:aws:states:us-east-1:123456789012:execution:boot-jobs:"+execs[0].Name, execs[0].ARN)
	var st jobs.State
	require.NoError(t, json.Unmarshal([]byte(execs[0].Input), &st))
	assert.Equal(t, jobs.State{Kind: "crm.sync", Payload: json.RawMessage(`{"job_id":"job_1"}`)}, st)

	// The same name and input again is the same execution; another input is refused.
	start := func(arn, name, input string) (*awssfn.StartExecutionOutput, error) {
		return c.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: aws.String(arn), Name: aws.String(name), Input: aws.String(input)})
	}
	out, err := start(machine, "again", `{"a":1}`)
	require.NoError(t, err)
	assert.Equal(t, "arn:aws:states:us-east-1:123456789012:execution:boot-jobs:again", aws.ToString(out.ExecutionArn))
	assert.False(t, aws.ToTime(out.StartDate).IsZero())
	_, err = start(machine, "again", `{"a":1}`)
	require.NoError(t, err)
	assert.Len(t, fake.Executions(), 2, "an idempotent start starts nothing")
	_, err = start(machine, "again", `{"a":2}`)
	var exists *sfntypes.ExecutionAlreadyExists
	assert.True(t, errors.As(err, &exists), "another input under a used name: %v", err)

	// Refusals, as the SDK's typed errors.
	_, err = start(other, "x", `{}`)
	var missing *sfntypes.StateMachineDoesNotExist
	assert.True(t, errors.As(err, &missing), "an unknown state machine: %v", err)
	_, err = start("jobs", "x", `{}`)
	var badARN *sfntypes.InvalidArn
	assert.True(t, errors.As(err, &badARN), "not an ARN: %v", err)
	_, err = start(machine, "a name/with:slash", `{}`)
	var badName *sfntypes.InvalidName
	assert.True(t, errors.As(err, &badName), "a name with refused characters: %v", err)
	_, err = start(machine, strings.Repeat("n", 81), `{}`)
	assert.True(t, errors.As(err, &badName), "a name over 80 characters: %v", err)
	_, err = start(machine, "y", `{"unterminated"`)
	var badInput *sfntypes.InvalidExecutionInput
	assert.True(t, errors.As(err, &badInput), "an input that is not JSON: %v", err)

	// Without a name or an input: the service names it and the input is {}.
	out, err = c.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: aws.String(machine)})
	require.NoError(t, err)
	execs = fake.Executions()
	require.Len(t, execs, 3)
	assert.Equal(t, aws.ToString(out.ExecutionArn), execs[2].ARN)
	assert.Equal(t, "{}", execs[2].Input)
	assert.Len(t, fake.Calls("StartExecution"), 10, "every request reached the fake")
}
