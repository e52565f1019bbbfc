// Package batch describes the outcome of a call that sends many entries at once to a
// service that may accept some and refuse others (SQS SendMessageBatch, EventBridge
// PutEvents): which entries were not accepted, and why, so that a caller can retry exactly
// those.
package batch

import (
	"fmt"
	"strings"
)

// Failure is one entry the service did not accept.
type Failure struct {
	// Index is the entry's position in the caller's argument.
	Index int
	// ID is the entry's own id where it has one (an audit event's id), else "".
	ID string
	// Code and Message are the service's (or the whole call's error, when the call failed).
	Code, Message string
	// SenderFault tells an entry refused as malformed (retrying it cannot help) from a
	// failure on the service's side.
	SenderFault bool
}

// Error lists the entries of a batch call that were not accepted; every other entry was.
type Error struct {
	// What names the call and its entries, for the message: "sqs: message(s) not sent".
	What     string
	Failures []Failure
	// Err is the last whole-call error, if a call failed (it matches errors.Is and As).
	Err error
}

// Error names how many entries failed and the first few of them.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", len(e.Failures), e.What)
	for i, f := range e.Failures {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failures)-i)
			break
		}
		fmt.Fprintf(&b, "; #%d", f.Index)
		if f.ID != "" {
			fmt.Fprintf(&b, " (%s)", f.ID)
		}
		fmt.Fprintf(&b, ": %s: %s", f.Code, f.Message)
	}
	return b.String()
}

// Unwrap returns the whole-call error.
func (e *Error) Unwrap() error { return e.Err }

// Failed reports whether the entry at index is among the failures.
func (e *Error) Failed(index int) bool {
	for _, f := range e.Failures {
		if f.Index == index {
			return true
		}
	}
	return false
}
