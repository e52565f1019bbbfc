package email

import (
	"errors"
	"fmt"
)

// ErrInvalidMessage is wrapped by every error Build returns for a message that cannot be
// built as given: a missing or malformed address, a CR or LF in a header value (header
// injection), text that is not UTF-8, a reserved or malformed extra header, a bad tag.
// Test with errors.Is; the message names the field.
var ErrInvalidMessage = errors.New("email: invalid message")

// ErrTooLarge is returned (wrapped) when a built message would exceed MaxMessageSize.
var ErrTooLarge = errors.New("email: message too large")

// ErrConfig is wrapped by errors caused by a sender's configuration rather than by the
// message or the receiving side: plain-text SMTP to a host that is not loopback, AUTH
// without encryption, a missing client. Retrying does not help until the configuration
// changes.
var ErrConfig = errors.New("email: invalid sender configuration")

// SendError is the error every Sender returns from Send. It tells a caller whether
// retrying the same message can succeed.
//
// Permanent means the message or its recipient was refused (an SMTP 5xx reply, an SES
// MessageRejected, a message that does not build): sending it again will fail again.
// Otherwise the failure is temporary (an SMTP 4xx reply, a network or TLS failure,
// throttling, a configuration error) and a later retry may succeed.
type SendError struct {
	// Permanent is true when retrying the same message cannot succeed.
	Permanent bool
	// Code is the SMTP reply code (550, 451, ...) or the HTTP status of an API
	// provider (400, 429, ...); 0 when there was no reply.
	Code int
	// Err is the underlying error.
	Err error
}

// Error describes the failure with its class and code.
func (e *SendError) Error() string {
	class := "temporary"
	if e.Permanent {
		class = "permanent"
	}
	if e.Code != 0 {
		return fmt.Sprintf("email: %s failure (%d): %v", class, e.Code, e.Err)
	}
	return fmt.Sprintf("email: %s failure: %v", class, e.Err)
}

// Unwrap returns the underlying error, so errors.Is and errors.As see through SendError.
func (e *SendError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is, or wraps, a *SendError marked permanent.
func IsPermanent(err error) bool {
	var se *SendError
	return errors.As(err, &se) && se.Permanent
}

// buildFailure wraps an error from build as a SendError: an invalid or oversized message
// is refused for good, anything else (no randomness, a signing failure) is temporary.
func buildFailure(err error) *SendError {
	return &SendError{
		Permanent: errors.Is(err, ErrInvalidMessage) || errors.Is(err, ErrTooLarge),
		Err:       err,
	}
}

// configFailure wraps a configuration error as a temporary SendError.
func configFailure(format string, args ...any) *SendError {
	return &SendError{Err: fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)}
}
