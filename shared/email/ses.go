package email

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
)

// SESClient is the part of *sesv2.Client that SES uses.
type SESClient interface {
	// SendEmail is sesv2.Client.SendEmail.
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

var _ SESClient = (*sesv2.Client)(nil)

// SES sends through Amazon SES v2 as a raw message: the message Build makes (without the
// X-Tags header: Message.Tags become SES message tags instead), DKIM-signed when DKIM is
// set, to the single recipient in Message.To.
type SES struct {
	// Client calls SES; normally a *sesv2.Client.
	Client SESClient
	// ConfigurationSet, when not empty, names the configuration set (event destinations,
	// dedicated IPs) to send with.
	ConfigurationSet string
	// FromARN, when not empty, is the ARN of the identity that authorizes the From
	// address (sending authorization).
	FromARN string
	// DKIM, when not nil, signs every message before it is sent (in addition to any
	// Easy DKIM signature SES adds).
	DKIM *Signer
}

var _ Sender = (*SES)(nil)

// permanentSESErrors are the SES error codes that refuse the message itself: sending it
// again fails the same way. Every other failure (throttling, a paused or suspended
// account, an unverified MAIL FROM domain, a missing configuration set, service errors,
// the network) is temporary: the message may go out once the account or configuration
// is fixed. The SES code stays reachable with errors.As(err, &smithy.APIError).
var permanentSESErrors = map[string]bool{
	"MessageRejected":     true, // e.g. a virus, or a recipient on the account's suppression list
	"BadRequestException": true, // the request does not validate (a malformed address, ...)
}

// Send builds, signs and sends m with SendEmail. Failures are *SendError with Code the
// HTTP status of the SES answer (0 when there was none). The Receipt's MessageID is the
// id SES assigned, which its sending events carry.
func (s *SES) Send(ctx context.Context, m Message) (Receipt, error) {
	if s.Client == nil {
		return Receipt{}, configFailure("ses needs a Client")
	}
	names, err := sortedTags(m.Tags)
	if err != nil {
		return Receipt{}, buildFailure(err)
	}
	untagged := m
	untagged.Tags = nil
	raw, _, err := build(untagged, time.Now())
	if err != nil {
		return Receipt{}, buildFailure(err)
	}
	if s.DKIM != nil {
		if raw, err = Sign(raw, *s.DKIM); err != nil {
			return Receipt{}, &SendError{Err: err}
		}
	}
	in := &sesv2.SendEmailInput{
		Content:     &types.EmailContent{Raw: &types.RawMessage{Data: raw}},
		Destination: &types.Destination{ToAddresses: []string{m.To.Address}},
	}
	for _, name := range names {
		in.EmailTags = append(in.EmailTags, types.MessageTag{Name: aws.String(name), Value: aws.String(m.Tags[name])})
	}
	if s.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.ConfigurationSet)
	}
	if s.FromARN != "" {
		in.FromEmailAddressIdentityArn = aws.String(s.FromARN)
	}
	out, err := s.Client.SendEmail(ctx, in)
	if err != nil {
		return Receipt{}, sesFailure(err)
	}
	return Receipt{MessageID: aws.ToString(out.MessageId), Provider: "ses"}, nil
}

// sesFailure classifies a SendEmail error.
func sesFailure(err error) *SendError {
	se := &SendError{Err: fmt.Errorf("ses SendEmail: %w", err)}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		se.Code = status.HTTPStatusCode()
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		se.Permanent = permanentSESErrors[apiErr.ErrorCode()]
	}
	return se
}
