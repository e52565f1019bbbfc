package sqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/botplatform/api/shared/queue"
)

// ScheduleAPI is the part of the EventBridge Scheduler client a Sender uses.
type ScheduleAPI interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
}

// Schedules sends a message whose Delay is longer than SQS can delay one (a wait step of up
// to 30 days) as an EventBridge Scheduler one-time schedule: at the message's due time,
// Scheduler sends it to the queue with its type attribute, as SendMessageBatch would have,
// and deletes the schedule. One schedule replaces the 15-minute hops such a wait would
// otherwise take (about 2,880 queue deliveries for 30 days).
type Schedules struct {
	Client ScheduleAPI
	// RoleARN is the role Scheduler assumes to send to the queue (sqs:SendMessage on it).
	RoleARN string
	// QueueARN is the queue's ARN, the schedule's target.
	QueueARN string
	// Group is the schedule group ("" is Scheduler's default group).
	Group string
	// Now is the clock due times are counted from (default time.Now).
	Now func() time.Time
}

// ScheduleNamePrefix starts the name of every schedule a Sender creates; IAM grants
// scheduler:CreateSchedule on names with it only.
const ScheduleNamePrefix = "q-"

// sendMessageTarget is Scheduler's universal target for SQS SendMessage: the schedule's
// Input is the SendMessage request itself, so the message keeps its type attribute.
const sendMessageTarget = "arn:aws:scheduler:::aws-sdk:sqs:sendMessage"

func (s *Schedules) check() error {
	var errs []error
	if s.Client == nil {
		errs = append(errs, errors.New("schedules need a Scheduler client"))
	}
	if s.RoleARN == "" || s.QueueARN == "" {
		errs = append(errs, errors.New("schedules need the role Scheduler assumes and the queue's ARN"))
	}
	return errors.Join(errs...)
}

// send creates the schedule that sends m when it is due. The schedule is named for the
// message and its due second, so a message sent twice (a retry after a lost answer) is
// scheduled once: Scheduler refuses the second name, which counts as done.
func (s *Schedules) send(ctx context.Context, queueURL string, m queue.Message) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	// Rounded up to the second: Scheduler's at() has seconds, and a job must not run early.
	due := now().UTC().Add(m.Delay + time.Second - 1).Truncate(time.Second)
	input, err := json.Marshal(map[string]any{
		"QueueUrl":    queueURL,
		"MessageBody": string(m.Body),
		"MessageAttributes": map[string]any{
			queue.TypeAttribute: map[string]string{"DataType": "String", "StringValue": m.Type},
		},
	})
	if err != nil {
		return err
	}
	in := &scheduler.CreateScheduleInput{
		Name:                       aws.String(scheduleName(m, due)),
		ScheduleExpression:         aws.String("at(" + due.Format("2006-01-02T15:04:05") + ")"),
		ScheduleExpressionTimezone: aws.String("UTC"),
		FlexibleTimeWindow:         &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      schedtypes.ActionAfterCompletionDelete,
		Description:                aws.String("A " + m.Type + " message, due " + due.Format(time.RFC3339)),
		Target: &schedtypes.Target{
			Arn:     aws.String(sendMessageTarget),
			RoleArn: aws.String(s.RoleARN),
			Input:   aws.String(string(input)),
		},
	}
	if s.Group != "" {
		in.GroupName = aws.String(s.Group)
	}
	_, err = s.Client.CreateSchedule(ctx, in)
	var conflict *schedtypes.ConflictException
	if errors.As(err, &conflict) {
		return nil // scheduled already: the same message, due at the same second
	}
	if err != nil {
		return fmt.Errorf("sqs: schedule a %s message due %s: %w", m.Type, due.Format(time.RFC3339), err)
	}
	return nil
}

// QueueARN returns the ARN of the queue at url (https://sqs.<region>.amazonaws.com/<account>/<name>).
func QueueARN(url string) (string, error) {
	rest, ok := strings.CutPrefix(url, "https://sqs.")
	host, path, ok2 := strings.Cut(rest, "/")
	region, domain, ok3 := strings.Cut(host, ".")
	account, name, ok4 := strings.Cut(path, "/")
	if !ok || !ok2 || !ok3 || !ok4 || region == "" || account == "" || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("sqs: %q is not a queue URL", url)
	}
	partition := "aws"
	if strings.HasSuffix(domain, ".com.cn") {
		partition = "aws-cn"
	}
	return "arn:" + partition + ":sqs:" + region + ":" + account + ":" + name, nil
}

// scheduleName names the schedule of m due at due: at most 64 characters of [0-9A-Za-z_.-].
func scheduleName(m queue.Message, due time.Time) string {
	h := sha256.New()
	h.Write([]byte(m.Type))
	h.Write([]byte{0})
	h.Write(m.Body)
	h.Write([]byte{0})
	h.Write([]byte(due.Format(time.RFC3339)))
	return ScheduleNamePrefix + strings.ToLower(hex.EncodeToString(h.Sum(nil))[:48])
}
