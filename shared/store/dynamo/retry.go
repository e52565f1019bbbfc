package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/store"
)

// RetryPolicy bounds how long a call keeps retrying when DynamoDB refuses work (throttling,
// a transaction conflict, an internal error) before the Store gives up with an error that
// wraps store.ErrUnavailable, which the HTTP layer answers with 503.
//
// Delays follow "full jitter" exponential backoff: before retry n (1, 2, ...) the call
// sleeps a uniformly random time in [0, min(MaxDelay, BaseDelay*2^(n-1))]. Jitter spreads
// the retries of callers that were throttled together, so they do not collide again.
type RetryPolicy struct {
	// MaxAttempts counts every attempt of one call, the first included; 1 disables
	// retries. Zero means the default, 8.
	MaxAttempts int
	// BaseDelay is the cap of the first retry's delay. Zero means the default, 25 ms
	// (DynamoDB answers in milliseconds; the SDK's own 1 s base suits slower services).
	BaseDelay time.Duration
	// MaxDelay caps every delay. Zero means the default, 1 s: with the defaults a call
	// gives up after at most about 2.6 s of sleeping, well inside API Gateway's 29 s, so
	// the client hears 503 and retries rather than timing out.
	MaxDelay time.Duration
}

// DefaultRetryPolicy returns the policy New uses unless WithRetry says otherwise.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 8, BaseDelay: 25 * time.Millisecond, MaxDelay: time.Second}
}

// withDefaults fills zero (and nonsensical negative) fields from DefaultRetryPolicy.
func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = d.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = d.MaxDelay
	}
	p.MaxDelay = max(p.MaxDelay, p.BaseDelay)
	return p
}

// backoff is the policy's delays: full jitter (see RetryPolicy).
func (p RetryPolicy) backoff() backoff.Policy {
	return backoff.Policy{Base: p.BaseDelay, Max: p.MaxDelay, Jitter: backoff.Full}
}

// retryer configures the SDK's standard retryer with the policy. The SDK keeps what it
// does well: which errors are transient (throttling codes, 5xx, broken connections),
// rewinding the request, clock-skew correction, and reusing a transaction's idempotency
// token across its retries. We replace its backoff (a 1 s base, and no jitter at all when
// the cap is under 1 s) and turn off its client-side retry quota: under sustained
// throttling that quota fails calls at once with a "retry quota exceeded" error, which is
// the opposite of backing off.
func (p RetryPolicy) retryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = p.MaxAttempts
		o.MaxBackoff = p.MaxDelay
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			// The SDK numbers the first retry 1, or 0 under AWS_NEW_RETRIES_2026.
			return p.backoff().Delay(max(attempt, 1)), nil
		})
		o.RateLimiter = ratelimit.None
		o.Retryables = append(o.Retryables, retry.RetryableErrorCode{Codes: extraRetryableCodes()})
	})
}

// extraRetryableCodes are DynamoDB error codes the SDK's defaults leave out.
// TransactionConflictException answers a single-item write that met an item under a
// running transaction; the others normally come with a 5xx status the SDK retries anyway,
// but are listed so that a proxy that rewrites the status cannot change the outcome.
func extraRetryableCodes() map[string]struct{} {
	return map[string]struct{}{
		"TransactionConflictException": {},
		"InternalServerError":          {},
		"ServiceUnavailable":           {},
	}
}

// unavailableCodes are the codes that mean "DynamoDB refused the work for now", whether or
// not retries came first (a policy with MaxAttempts 1 sees them on the first attempt).
func unavailableCodes() map[string]struct{} {
	codes := extraRetryableCodes()
	for c := range retry.DefaultThrottleErrorCodes {
		codes[c] = struct{}{}
	}
	return codes
}

// isUnavailable reports an error after which the client should simply try again later.
func isUnavailable(err error) bool {
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) {
		return true // the SDK retried a transient error until the policy ran out
	}
	var quota ratelimit.QuotaExceededError
	if errors.As(err, &quota) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		_, ok := unavailableCodes()[api.ErrorCode()]
		return ok
	}
	return false
}

// wrapErr gives an SDK error the store's meaning: a cancelled or expired context matches
// ctx.Err() (the SDK does not always wrap it), and a refusal to do work now matches
// store.ErrUnavailable. Anything else is a plain error (a 500): a validation error, a
// missing table, missing permissions.
func wrapErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("dynamo: %s: %w: %w", op, cerr, err)
	}
	if isUnavailable(err) {
		return fmt.Errorf("dynamo: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("dynamo: %s: %w", op, err)
}

// Cancellation reason codes of TransactionCanceledException, per write.
const (
	reasonNone              = "None"
	reasonConditionFailed   = "ConditionalCheckFailed"
	reasonConflict          = "TransactionConflict"
	reasonThrottled         = "ThrottlingError"
	reasonProvisionedExceed = "ProvisionedThroughputExceeded"
)

// transientReason reports a cancellation reason after which the same transaction may
// succeed if sent again.
func transientReason(r types.CancellationReason) bool {
	switch aws.ToString(r.Code) {
	case reasonConflict, reasonThrottled, reasonProvisionedExceed:
		return true
	}
	return false
}
