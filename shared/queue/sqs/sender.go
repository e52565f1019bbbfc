// Package sqs runs the work queue on Amazon SQS: Sender enqueues with SendMessageBatch, and
// Consumer is the handler of a Lambda SQS event source mapping that reports partial batch
// failures, so only the failed records of a batch come back.
//
// A message's Type travels as the String message attribute "type" and its Body as the
// message body. The queue's visibility timeout, redrive policy (maxReceiveCount and DLQ)
// and the event source's ReportBatchItemFailures are set in infra.
package sqs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/batch"
	"github.com/botplatform/api/shared/queue"
)

// SendAPI is the part of *sqs.Client the Sender uses.
type SendAPI interface {
	SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, optFns ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error)
}

// SQS's batch limits: entries per SendMessageBatch, and the batch's total payload.
const (
	MaxBatchEntries = 10
	MaxBatchBytes   = 256 * 1024
)

// SenderConfig configures a Sender.
type SenderConfig struct {
	// QueueURL is the queue's URL. Required.
	QueueURL string
	// MaxAttempts bounds how often one entry is sent when SQS reports it failed on its side
	// (default 4). Whole-call failures are the SDK retryer's business, not ours.
	MaxAttempts int
	// Backoff spaces those retries (default 50 ms doubling to 1 s).
	Backoff backoff.Policy
	// Schedules carries messages whose Delay is longer than SQS can delay one
	// (queue.MaxDelay): nil refuses them.
	Schedules *Schedules
}

// Sender sends messages to one SQS queue. It is safe for concurrent use.
type Sender struct {
	client SendAPI
	cfg    SenderConfig
}

var _ queue.Sender = (*Sender)(nil)

// NewSender returns a Sender over client (an *sqs.Client built once per container).
func NewSender(client SendAPI, cfg SenderConfig) (*Sender, error) {
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Backoff == (backoff.Policy{}) {
		cfg.Backoff = backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second}
	}
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("an SQS client is required"))
	}
	if cfg.QueueURL == "" {
		errs = append(errs, errors.New("a queue URL is required"))
	}
	if cfg.MaxAttempts < 1 {
		errs = append(errs, errors.New("max attempts must be at least 1"))
	}
	if cfg.Schedules != nil {
		errs = append(errs, cfg.Schedules.check())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sqs sender config: %w", err)
	}
	return &Sender{client: client, cfg: cfg}, nil
}

// Send enqueues msgs in batches of at most MaxBatchEntries entries and MaxBatchBytes bytes.
// Entries SQS fails on its side are resent, alone, with backoff; entries it refuses as the
// sender's fault are not. On failure it returns a *batch.Error naming exactly the messages
// that were not enqueued, so a caller can retry those and only those.
func (s *Sender) Send(ctx context.Context, msgs ...queue.Message) error {
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	serr := &batch.Error{What: "sqs: message(s) not sent"}
	// What SQS can delay goes to the queue in batches; what it cannot, to a schedule each.
	var now []int
	for i, m := range msgs {
		if m.Delay <= queue.MaxDelay {
			now = append(now, i)
			continue
		}
		if s.cfg.Schedules == nil {
			serr.Failures = append(serr.Failures, batch.Failure{Index: i, Code: "DelayTooLong", SenderFault: true,
				Message: fmt.Sprintf("a delay of %s is longer than SQS's %s and this sender has no schedules", m.Delay, queue.MaxDelay)})
			continue
		}
		if err := s.cfg.Schedules.send(ctx, s.cfg.QueueURL, m); err != nil {
			serr.Err = err
			serr.Failures = append(serr.Failures, batch.Failure{Index: i, Code: "ScheduleFailed", Message: err.Error()})
		}
	}
	for start := 0; start < len(now); {
		end, size := start, 0
		for end < len(now) && end-start < MaxBatchEntries && size+msgs[now[end]].Size() <= MaxBatchBytes {
			size += msgs[now[end]].Size()
			end++
		}
		s.sendBatch(ctx, msgs, now[start:end], serr)
		start = end
	}
	if len(serr.Failures) > 0 {
		slices.SortFunc(serr.Failures, func(a, b batch.Failure) int { return a.Index - b.Index })
		return serr
	}
	return nil
}

// sendBatch sends the messages at indexes idx as one batch, resending the entries that
// failed on SQS's side, and records what could not be sent in serr.
func (s *Sender) sendBatch(ctx context.Context, msgs []queue.Message, idx []int, serr *batch.Error) {
	pending := make([]types.SendMessageBatchRequestEntry, 0, len(idx))
	for _, i := range idx {
		pending = append(pending, entry(i, msgs[i]))
	}
	for attempt := 1; ; attempt++ {
		out, err := s.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{
			QueueUrl: aws.String(s.cfg.QueueURL),
			Entries:  pending,
		})
		if err != nil {
			// The SDK has retried what it deems retryable; what is left is not ours to fix.
			serr.Err = err
			for _, e := range pending {
				serr.Failures = append(serr.Failures, batch.Failure{Index: index(e.Id), Code: "CallFailed", Message: err.Error()})
			}
			return
		}
		var retry []types.SendMessageBatchRequestEntry
		byID := make(map[string]types.SendMessageBatchRequestEntry, len(pending))
		for _, e := range pending {
			byID[aws.ToString(e.Id)] = e
		}
		for _, ok := range out.Successful {
			delete(byID, aws.ToString(ok.Id))
		}
		var failures []batch.Failure
		for _, f := range out.Failed {
			e, known := byID[aws.ToString(f.Id)]
			if !known {
				continue
			}
			delete(byID, aws.ToString(f.Id))
			fail := batch.Failure{Index: index(e.Id), Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
			if f.SenderFault {
				serr.Failures = append(serr.Failures, fail)
				continue
			}
			retry = append(retry, e)
			failures = append(failures, fail)
		}
		// An entry in neither list was not confirmed: resending risks a duplicate, which
		// at-least-once consumers absorb, while dropping it would lose a job.
		for _, e := range byID {
			retry = append(retry, e)
			failures = append(failures, batch.Failure{Index: index(e.Id), Code: "NotConfirmed", Message: "entry missing from the response"})
		}
		if len(retry) == 0 {
			return
		}
		if attempt >= s.cfg.MaxAttempts || s.cfg.Backoff.Sleep(ctx, attempt) != nil {
			serr.Failures = append(serr.Failures, failures...)
			if ctx.Err() != nil {
				serr.Err = ctx.Err()
			}
			return
		}
		pending = retry
	}
}

// entry renders message i; its batch entry id is its index in Send's arguments, which is
// unique within the batch and maps a failure straight back to the caller's message.
func entry(i int, m queue.Message) types.SendMessageBatchRequestEntry {
	e := types.SendMessageBatchRequestEntry{
		Id:          aws.String(strconv.Itoa(i)),
		MessageBody: aws.String(string(m.Body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			queue.TypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(m.Type)},
		},
	}
	if m.Delay > 0 {
		// Rounded up: a job asked to wait must not run early.
		e.DelaySeconds = int32((m.Delay + time.Second - 1) / time.Second)
	}
	return e
}

func index(id *string) int {
	n, _ := strconv.Atoi(aws.ToString(id))
	return n
}
