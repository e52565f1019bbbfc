package email

import "context"

// Sender delivers one message. Implementations build the message with Build (so the same
// validation applies everywhere), sign it when they have a DKIM signer, and return every
// failure as a *SendError.
type Sender interface {
	// Send delivers m, or returns a *SendError saying whether a retry can succeed.
	Send(ctx context.Context, m Message) (Receipt, error)
}

// Receipt is what a Sender reports for a delivered message.
type Receipt struct {
	// MessageID identifies the message: the Message-ID header (SMTP, Sink) or the id the
	// provider assigned (SES), which is what its delivery and bounce events carry.
	MessageID string
	// Provider names the Sender: "smtp", "ses" or "sink".
	Provider string
}

// Signing returns a copy of s that signs every message with k, for a sender that signs per
// message (the platform's: *SES, *SMTP and *Sink) and ok true. Another Sender cannot sign:
// it is returned as it is, with ok false unless k is nil.
func Signing(s Sender, k *Signer) (signing Sender, ok bool) {
	switch x := s.(type) {
	case *SES:
		c := *x
		c.DKIM = k
		return &c, true
	case *SMTP:
		c := *x
		c.DKIM = k
		return &c, true
	case *Sink:
		c := *x
		c.DKIM = k
		return &c, true
	}
	return s, k == nil
}
