// Package channeltest holds what the channel adapters' tests share: the invariants every
// adapter's parsed updates must hold, whatever the provider sent.
package channeltest

import (
	"encoding/json"
	"testing"

	"github.com/botplatform/api/shared/channel"
)

// CheckInbound fails tb unless every update is one the webhooks may enqueue: it names the
// provider's update and the sender, carries exactly one of a text and a button payload, and
// encodes as the queue message's JSON. (Its time may be zero when the provider sent none:
// the runtime then uses the time it handles the update.)
func CheckInbound(tb testing.TB, body []byte, updates []channel.Inbound) {
	tb.Helper()
	for i, in := range updates {
		switch {
		case in.UpdateID == "":
			tb.Fatalf("update %d of %q has no update id", i, body)
		case in.UserID == "":
			tb.Fatalf("update %d of %q has no sender", i, body)
		case (in.Text == "") == (in.Payload == ""):
			tb.Fatalf("update %d of %q has %q as text and %q as payload: exactly one is set", i, body, in.Text, in.Payload)
		}
		if _, err := json.Marshal(in); err != nil {
			tb.Fatalf("update %d of %q does not encode: %v", i, body, err)
		}
	}
}
