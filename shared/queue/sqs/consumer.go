package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/queue"
)

// VisibilityAPI is the part of *sqs.Client the Consumer uses.
type VisibilityAPI interface {
	ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, optFns ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error)
}

// MaxVisibility is the longest visibility timeout SQS accepts.
const MaxVisibility = 12 * time.Hour

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// Handler processes each record's message. Required.
	Handler queue.Handler
	// Client changes message visibility, for queue.ExtendVisibility and RetryBackoff. When
	// nil, handlers cannot extend and failed records wait out the queue's timeout.
	Client VisibilityAPI
	// Concurrency is how many records of a batch run at once (default 1). Records of a
	// FIFO queue always run one by one, in order.
	Concurrency int
	// RetryBackoff, when set, makes a failed record visible again after the backoff for
	// its receive count instead of after the queue's whole visibility timeout, which is
	// sized for the slowest job rather than for a quick retry.
	RetryBackoff *backoff.Policy
	// QueueURL maps a record's eventSourceARN to its queue URL, for visibility changes.
	// The default builds the regional endpoint URL from the ARN.
	QueueURL func(arn string) (string, error)
	// Log receives handler failures (default: discarded).
	Log *slog.Logger
}

// Consumer is the handler of a Lambda SQS event source mapping with ReportBatchItemFailures
// on: lambda.Start(consumer.Handle).
type Consumer struct {
	cfg ConsumerConfig
}

// NewConsumer returns a Consumer for cfg.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.QueueURL == nil {
		cfg.QueueURL = QueueURLFromARN
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if cfg.Handler == nil {
		errs = append(errs, errors.New("a handler is required"))
	}
	if cfg.Concurrency < 1 {
		errs = append(errs, errors.New("concurrency must be at least 1"))
	}
	if cfg.RetryBackoff != nil && cfg.Client == nil {
		errs = append(errs, errors.New("retry backoff needs a client to change visibility"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sqs consumer config: %w", err)
	}
	return &Consumer{cfg: cfg}, nil
}

// Handle processes the batch and reports the records that failed, by message id, so that
// SQS deletes the others: a batch with one bad record does not redo nine good ones. It never
// returns an error, which would make SQS redeliver the whole batch.
//
// On a FIFO queue the first failure stops the batch: that record and every later one are
// reported failed (unprocessed), because a later message of a group must not run before an
// earlier one.
func (c *Consumer) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	failed := make([]bool, len(ev.Records))
	if len(ev.Records) > 0 && strings.HasSuffix(ev.Records[0].EventSourceARN, ".fifo") {
		for i, r := range ev.Records {
			if err := c.process(ctx, r); err != nil {
				for j := i; j < len(ev.Records); j++ {
					failed[j] = true
				}
				break
			}
		}
	} else {
		sem := make(chan struct{}, c.cfg.Concurrency)
		var wg sync.WaitGroup
		for i, r := range ev.Records {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				failed[i] = c.process(ctx, r) != nil
			}()
		}
		wg.Wait()
	}
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for i, f := range failed {
		if f {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	return resp, nil
}

// process runs the handler on one record and, on failure, schedules its retry.
func (c *Consumer) process(ctx context.Context, r events.SQSMessage) error {
	m, err := message(r)
	if err == nil {
		v := &visibility{c: c, arn: r.EventSourceARN, receipt: r.ReceiptHandle}
		err = queue.Call(queue.WithExtender(ctx, v), c.cfg.Handler, m)
	}
	if err == nil {
		return nil
	}
	c.cfg.Log.WarnContext(ctx, "queue: handler failed", "message_id", r.MessageId, "type", m.Type, "attempt", m.Attempt, "error", err)
	asked := queue.RetryDelay(err)
	if (c.cfg.RetryBackoff != nil || asked > 0 && c.cfg.Client != nil) && ctx.Err() == nil {
		var d time.Duration
		if c.cfg.RetryBackoff != nil {
			d = c.cfg.RetryBackoff.Delay(max(m.Attempt, 1))
		}
		d = max(d, asked) // a provider's Retry-After (queue.RetryAfter) wins when longer
		v := &visibility{c: c, arn: r.EventSourceARN, receipt: r.ReceiptHandle}
		if verr := v.set(ctx, d); verr != nil {
			// The record still fails and comes back after the queue's timeout.
			c.cfg.Log.WarnContext(ctx, "queue: could not schedule the retry", "message_id", r.MessageId, "error", verr)
		}
	}
	return err
}

// message turns a record into the queue.Message its producer sent.
func message(r events.SQSMessage) (queue.Message, error) {
	m := queue.Message{ID: r.MessageId, Body: json.RawMessage(r.Body)}
	if a, ok := r.MessageAttributes[queue.TypeAttribute]; ok && a.StringValue != nil {
		m.Type = *a.StringValue
	}
	m.Attempt, _ = strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
	switch {
	case m.Type == "":
		return m, fmt.Errorf("queue: message %s has no %q attribute", r.MessageId, queue.TypeAttribute)
	case !json.Valid(m.Body):
		return m, fmt.Errorf("queue: message %s body is not JSON", r.MessageId)
	}
	return m, nil
}

// visibility is the queue.Extender of one record.
type visibility struct {
	c       *Consumer
	arn     string
	receipt string
}

// ExtendVisibility implements queue.Extender with ChangeMessageVisibility.
func (v *visibility) ExtendVisibility(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return errors.New("queue: visibility extension must be positive")
	}
	return v.set(ctx, d)
}

func (v *visibility) set(ctx context.Context, d time.Duration) error {
	if v.c.cfg.Client == nil {
		return errors.New("queue: consumer has no SQS client to change visibility")
	}
	url, err := v.c.cfg.QueueURL(v.arn)
	if err != nil {
		return err
	}
	// Whole seconds, rounded up, within SQS's range.
	secs := int32(min((d+time.Second-1)/time.Second, MaxVisibility/time.Second))
	_, err = v.c.cfg.Client.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(url),
		ReceiptHandle:     aws.String(v.receipt),
		VisibilityTimeout: secs,
	})
	if err != nil {
		return fmt.Errorf("queue: change visibility: %w", err)
	}
	return nil
}

// QueueURLFromARN returns the URL of the queue arn:PARTITION:sqs:REGION:ACCOUNT:NAME on
// SQS's regional endpoint.
func QueueURLFromARN(arn string) (string, error) {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[2] != "sqs" || p[3] == "" || p[4] == "" || p[5] == "" {
		return "", fmt.Errorf("queue: %q is not an SQS queue ARN", arn)
	}
	domain := "amazonaws.com"
	if p[1] == "aws-cn" {
		domain = "amazonaws.com.cn"
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", p[3], domain, p[4], p[5]), nil
}
