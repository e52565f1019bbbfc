package sqs_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/batch"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/sqs"
)

// A message due later than SQS can delay travels as one EventBridge Scheduler schedule
// that sends it, with its type, to the queue at its due second and is deleted after; what
// SQS can delay still goes in a batch. The same message sent again is scheduled once.
func TestLongDelaysBecomeSchedules(t *testing.T) {
	t.Parallel()
	f := newFakeSQS(t, func(string, int) string { return "" })
	sched := awsfake.New(t, awsfake.Scheduler)
	sched.Handle("CreateSchedule", func(json.RawMessage) (any, *awsfake.Error) {
		return map[string]string{"ScheduleArn": "arn:aws:scheduler:us-east-1:123456789012:schedule/default/x"}, nil
	})
	now := time.Date(2031, 3, 14, 15, 9, 26, 500_000_000, time.UTC)
	s, err := sqs.NewSender(awssqs.NewFromConfig(f.Config()), sqs.SenderConfig{QueueURL: queueURL, Schedules: &sqs.Schedules{
		Client: scheduler.NewFromConfig(sched.Config()), RoleARN: "arn:aws:iam::123456789012:role/waits",
		QueueARN: "arn:aws:sqs:us-east-1:123456789012:jobs", Now: func() time.Time { return now },
	}})
	require.NoError(t, err)

	msgs := []queue.Message{
		{Type: "runtime.resume", Body: json.RawMessage(`{"seq":1}`), Delay: 30 * 24 * time.Hour},
		{Type: "test.job", Body: json.RawMessage(`{"n":1}`), Delay: queue.MaxDelay},
	}
	require.NoError(t, s.Send(t.Context(), msgs...))
	assert.Equal(t, [][]string{{`{"n":1}`}}, f.batches(t), "what SQS can delay goes to the queue")

	calls := sched.Calls("CreateSchedule")
	require.Len(t, calls, 1)
	var in struct {
		ScheduleExpression, ScheduleExpressionTimezone, ActionAfterCompletion string
		FlexibleTimeWindow                                                    struct{ Mode string }
		Target                                                                struct{ Arn, RoleArn, Input string }
	}
	require.NoError(t, json.Unmarshal(calls[0], &in))
	assert.Equal(t, "at(2031-04-13T15:09:27)", in.ScheduleExpression, "30 days on, rounded up to the second")
	assert.Equal(t, "UTC", in.ScheduleExpressionTimezone)
	assert.Equal(t, "DELETE", in.ActionAfterCompletion)
	assert.Equal(t, "OFF", in.FlexibleTimeWindow.Mode)
	assert.Equal(t, "arn:aws:scheduler:::aws-sdk:sqs:sendMessage", in.Target.Arn)
	assert.Equal(t, "arn:aws:iam::123456789012:role/waits", in.Target.RoleArn)
	assert.JSONEq(t, `{"QueueUrl":"`+queueURL+`","MessageBody":"{\"seq\":1}",
		"MessageAttributes":{"type":{"DataType":"String","StringValue":"runtime.resume"}}}`, in.Target.Input)
	path := sched.Paths("CreateSchedule")[0]
	name := strings.TrimPrefix(path, "/schedules/")
	assert.True(t, strings.HasPrefix(name, sqs.ScheduleNamePrefix), name)
	assert.LessOrEqual(t, len(name), 64)

	// Sent again (a retry after a lost answer): Scheduler refuses the same name, which is done.
	sched.Handle("CreateSchedule", func(json.RawMessage) (any, *awsfake.Error) {
		return nil, &awsfake.Error{Status: 409, Type: "ConflictException", Message: "schedule exists"}
	})
	require.NoError(t, s.Send(t.Context(), msgs[0]))
	assert.Equal(t, path, sched.Paths("CreateSchedule")[1], "the same name")

	// A schedule that fails is the message's failure, named by its index.
	sched.Handle("CreateSchedule", func(json.RawMessage) (any, *awsfake.Error) {
		return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: "no"}
	})
	err = s.Send(t.Context(), msgs[1], msgs[0])
	var be *batch.Error
	require.True(t, errors.As(err, &be), "%v", err)
	require.Len(t, be.Failures, 1)
	assert.Equal(t, 1, be.Failures[0].Index)
}

// Without schedules a sender refuses what SQS cannot delay, instead of sending it early.
func TestLongDelayWithoutSchedulesIsRefused(t *testing.T) {
	t.Parallel()
	f := newFakeSQS(t, func(string, int) string { return "" })
	s := newSender(t, f, 1)
	err := s.Send(t.Context(), queue.Message{Type: "t", Body: json.RawMessage(`1`), Delay: time.Hour})
	var be *batch.Error
	require.True(t, errors.As(err, &be), "%v", err)
	assert.Equal(t, "DelayTooLong", be.Failures[0].Code)
	assert.True(t, be.Failures[0].SenderFault)
	assert.Empty(t, f.batches(t))
}

func TestQueueARN(t *testing.T) {
	t.Parallel()
	arn, err := sqs.QueueARN("https://sqs.eu-west-1.amazonaws.com/123456789012/botplatform-prod-jobs")
	require.NoError(t, err)
	assert.Equal(t, "arn:aws:sqs:eu-west-1:123456789012:botplatform-prod-jobs", arn)
	for _, bad := range []string{"", "http://sqs.x/1/q", "https://sqs.eu-west-1.amazonaws.com/123", "https://sqs.eu-west-1.amazonaws.com/1/q/x"} {
		_, err := sqs.QueueARN(bad)
		assert.Error(t, err, bad)
	}
}
