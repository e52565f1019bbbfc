// Package emaillinks makes and checks the signed references a sent email carries (its open
// pixel, each tracked link and its unsubscribe link) and those of a messenger broadcast's
// tracked link buttons. A token names the bot, campaign and recipient (and for a click, the
// link's index in the campaign's link table) and is signed
// with HMAC-SHA-256, so a tampered token is refused before anything is looked up, and a click
// can only ever redirect to a URL the campaign itself sent (looked up by index, never taken
// from the token or the query string).
package emaillinks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// Kind is what a token is for; a token of one kind is refused as another.
type Kind string

// The token kinds.
const (
	Open        Kind = "o"
	Click       Kind = "c"
	Unsubscribe Kind = "u"
	// BroadcastClick is a tracked link button of a messenger broadcast (Campaign is the
	// broadcast, Recipient its row).
	BroadcastClick Kind = "b"
)

// Ref is what a token refers to.
type Ref struct {
	Bot       string
	Campaign  string
	Recipient string
	// Link is the index of a click's URL in the campaign's link table (0 for other kinds).
	Link int
}

// ErrInvalid means a token is malformed, of another kind, or not signed with this key.
var ErrInvalid = errors.New("emaillinks: invalid token")

// MaxTokenLen bounds a token read from a URL before any work is done on it.
const MaxTokenLen = 512

// macLen is the signature's length in bytes: 128 bits, as for a session cookie.
const macLen = 16

// Signer makes and checks tokens with one key.
type Signer struct{ key []byte }

// New returns a Signer; key must be at least 32 bytes and shared by every process that
// makes or checks tokens.
func New(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("emaillinks: the key must be at least 32 bytes")
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Token returns the token of r for kind k.
func (s *Signer) Token(k Kind, r Ref) string {
	payload := strings.Join([]string{r.Bot, r.Campaign, r.Recipient, strconv.Itoa(r.Link)}, ".")
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(s.mac(k, payload))
}

func (s *Signer) mac(k Kind, payload string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(k))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)[:macLen]
}

// Parse checks a token of kind k and returns its reference.
func (s *Signer) Parse(k Kind, token string) (Ref, error) {
	if len(token) > MaxTokenLen {
		return Ref{}, ErrInvalid
	}
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return Ref{}, ErrInvalid
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(k, string(payload))) {
		return Ref{}, ErrInvalid
	}
	parts := strings.Split(string(payload), ".")
	if len(parts) != 4 {
		return Ref{}, ErrInvalid
	}
	link, err := strconv.Atoi(parts[3])
	if err != nil || link < 0 {
		return Ref{}, ErrInvalid
	}
	return Ref{Bot: parts[0], Campaign: parts[1], Recipient: parts[2], Link: link}, nil
}

// The public paths of the tokens, below the deployment's public base URL.
const (
	OpenPrefix        = "/e/t/o/"
	ClickPrefix       = "/e/t/c/"
	UnsubscribePrefix = "/u/"
	// BroadcastClickPrefix is the path of a broadcast's tracked link buttons.
	BroadcastClickPrefix = "/b/c/"
)

// OpenURL is the open pixel's URL.
func (s *Signer) OpenURL(base string, r Ref) string {
	r.Link = 0
	return strings.TrimRight(base, "/") + OpenPrefix + s.Token(Open, r) + ".gif"
}

// ClickURL is the tracked URL of the campaign's link number link.
func (s *Signer) ClickURL(base string, r Ref, link int) string {
	r.Link = link
	return strings.TrimRight(base, "/") + ClickPrefix + s.Token(Click, r)
}

// BroadcastClickURL is the tracked URL of a broadcast message's link button number link.
func (s *Signer) BroadcastClickURL(base string, r Ref, link int) string {
	r.Link = link
	return strings.TrimRight(base, "/") + BroadcastClickPrefix + s.Token(BroadcastClick, r)
}

// UnsubscribeURL is the unsubscribe page, and the target of the RFC 8058 one-click POST.
func (s *Signer) UnsubscribeURL(base string, r Ref) string {
	r.Link = 0
	return strings.TrimRight(base, "/") + UnsubscribePrefix + s.Token(Unsubscribe, r)
}
