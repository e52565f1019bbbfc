package whatsapp

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
)

var _ channel.Adapter = (*Adapter)(nil)

// SignatureHeader carries the signature of a webhook delivery: "sha256=" and the hex
// HMAC-SHA256 of the raw body under the Meta app's secret.
const SignatureHeader = "X-Hub-Signature-256"

// Sign returns the SignatureHeader value of body under secret (for tests and fakes that
// deliver webhooks).
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks that a webhook delivery was signed with the app secret. The secret is the
// Meta app's, not the channel's: WhatsApp has one webhook for every number of every
// account the app serves, so conn is not consulted. Without a configured secret nothing
// verifies.
func (a *Adapter) Verify(r *http.Request, body []byte, _ channel.Connection) error {
	return a.VerifySignature(r.Header.Get(SignatureHeader), body)
}

// VerifySignature checks a SignatureHeader value against body in constant time.
func (a *Adapter) VerifySignature(header string, body []byte) error {
	fail := func(msg string) error {
		return &channel.Error{Kind: channel.ErrUnauthenticWebhook, Provider: channel.WhatsApp, Code: "signature", Message: msg}
	}
	if len(a.appSecret) == 0 {
		return errors.Join(ErrNotConfigured, fail("no app secret is configured (WHATSAPP_APP_SECRET): no delivery can be verified"))
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return fail("missing or malformed " + SignatureHeader)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return fail("malformed " + SignatureHeader)
	}
	m := hmac.New(sha256.New, a.appSecret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return fail("the signature does not match the body")
	}
	return nil
}

// VerifyChallenge answers Meta's subscription check (GET on the webhook URL with
// hub.mode=subscribe, hub.verify_token and hub.challenge): ok when the mode is subscribe and
// the token equals the configured verify token (compared in constant time); the challenge
// is then to be echoed as the response body. An empty verifyToken never matches.
func VerifyChallenge(query url.Values, verifyToken string) (challenge string, ok bool) {
	if verifyToken == "" || query.Get("hub.mode") != "subscribe" {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(query.Get("hub.verify_token")), []byte(verifyToken)) != 1 {
		return "", false
	}
	challenge = query.Get("hub.challenge")
	return challenge, challenge != ""
}

// Update is one inbound message with the business phone number it was sent to: the
// webhooks family finds the channel by PhoneNumberID (the channel's lookup key).
type Update struct {
	PhoneNumberID string
	Inbound       channel.Inbound
}

// TemplateStatus is a template review outcome or lifecycle change
// (message_template_status_update).
type TemplateStatus struct {
	// BusinessAccountID is the WABA the template belongs to (the entry's id).
	BusinessAccountID string
	// ID is the provider's template id; Name and Language identify it too.
	ID       string
	Name     string
	Language string
	// Status is the provider's event: APPROVED, REJECTED, PENDING, PAUSED, DISABLED,
	// IN_APPEAL, PENDING_DELETION, DELETED, FLAGGED, REINSTATED, ARCHIVED, ...
	Status string
	// Reason explains a rejection ("" when the provider says NONE).
	Reason string
	At     time.Time
}

// MessageStatus is what WhatsApp later says of a message a business number sent (the
// statuses of a "messages" change): sent, delivered, read or failed, with the error of a
// failure.
type MessageStatus struct {
	// PhoneNumberID is the business number that sent the message: the webhooks family
	// finds the channel by it.
	PhoneNumberID string
	// MessageID is the wamid the send answered.
	MessageID string
	// Status is the provider's, lower case: StatusSent, StatusDelivered, StatusRead,
	// StatusFailed (or whatever Meta adds later, which consumers ignore).
	Status string
	// At is the provider's timestamp of the status; zero when it sent none that parses.
	At time.Time
	// RecipientID is the WhatsApp id the message went to.
	RecipientID string
	// ErrorCode and ErrorTitle are the first error of a failed message ("" otherwise).
	ErrorCode  string
	ErrorTitle string
}

// The values of MessageStatus.Status that Meta documents.
const (
	// StatusSent: WhatsApp took the message (the send's answer said as much already).
	StatusSent = "sent"
	// StatusDelivered: the message reached the person's device.
	StatusDelivered = "delivered"
	// StatusRead: the person opened it (when they have read receipts on). Meta may send
	// read without delivered when both happen at once.
	StatusRead = "read"
	// StatusFailed: WhatsApp took the message and could not deliver it.
	StatusFailed = "failed"
)

// Envelope is what a verified webhook body holds that this platform acts on.
type Envelope struct {
	// Updates are the inbound messages, each with the number it was sent to.
	Updates []Update
	// TemplateStatuses are template review outcomes and lifecycle changes.
	TemplateStatuses []TemplateStatus
	// MessageStatuses are delivery and read receipts and failures of sent messages.
	MessageStatuses []MessageStatus
}

// wireEnvelope is the webhook body: {object, entry[].changes[].{field, value}}.
type wireEnvelope struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Time    int64  `json:"time"`
		Changes []struct {
			Field string          `json:"field"`
			Value json.RawMessage `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type messagesValue struct {
	MessagingProduct string `json:"messaging_product"`
	Metadata         struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []struct {
		Profile struct {
			Name string `json:"name"`
		} `json:"profile"`
		WaID string `json:"wa_id"`
	} `json:"contacts"`
	Messages []struct {
		From      string `json:"from"`
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Text      *struct {
			Body string `json:"body"`
		} `json:"text"`
		Interactive *struct {
			Type        string `json:"type"`
			ButtonReply *struct {
				ID    string `json:"id"`
				Title string `json:"title"`
			} `json:"button_reply"`
			ListReply *struct {
				ID    string `json:"id"`
				Title string `json:"title"`
			} `json:"list_reply"`
		} `json:"interactive"`
		Button *struct {
			Payload string `json:"payload"`
			Text    string `json:"text"`
		} `json:"button"`
	} `json:"messages"`
	Statuses []struct {
		ID          string      `json:"id"`
		Status      string      `json:"status"`
		Timestamp   looseString `json:"timestamp"`
		RecipientID string      `json:"recipient_id"`
		Errors      []struct {
			Code  looseString `json:"code"`
			Title string      `json:"title"`
		} `json:"errors"`
	} `json:"statuses"`
}

// looseString reads a JSON string or number as its text, and anything else as "": Meta
// documents status timestamps as strings and error codes as numbers, and one odd field
// must not cost the whole delivery (which carries other messages' statuses too).
type looseString string

func (l *looseString) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = looseString(s)
		return nil
	}
	var n json.Number
	if json.Unmarshal(b, &n) == nil {
		*l = looseString(n)
		return nil
	}
	*l = ""
	return nil
}

type templateStatusValue struct {
	Event    string      `json:"event"`
	ID       json.Number `json:"message_template_id"`
	Name     string      `json:"message_template_name"`
	Language string      `json:"message_template_language"`
	Reason   string      `json:"reason"`
}

// Webhook fields this package reads (the statuses of sent messages arrive within
// "messages"); the others (quality and category updates) are ignored.
const (
	fieldMessages       = "messages"
	fieldTemplateStatus = "message_template_status_update"
)

// ParseEnvelope reads a verified webhook body: inbound messages (text; reply button and
// list presses and template quick replies as Payload), each with the phone number id it
// was sent to; template status changes; and the statuses of sent messages. Message kinds
// without text or payload (media, locations, reactions) yield nothing. What it returns is
// at most linear in the body (which the webhook caps): one value per element read.
func ParseEnvelope(body []byte) (Envelope, error) {
	var env wireEnvelope
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return Envelope{}, fmt.Errorf("whatsapp: webhook body: %w", err)
	}
	if env.Object != "whatsapp_business_account" {
		return Envelope{}, fmt.Errorf("whatsapp: webhook object %q is not whatsapp_business_account", env.Object)
	}
	var out Envelope
	for _, e := range env.Entry {
		for _, ch := range e.Changes {
			switch ch.Field {
			case fieldMessages:
				var v messagesValue
				if err := json.Unmarshal(ch.Value, &v); err != nil {
					return Envelope{}, fmt.Errorf("whatsapp: webhook messages value: %w", err)
				}
				out.Updates = append(out.Updates, messageUpdates(v)...)
				out.MessageStatuses = append(out.MessageStatuses, messageStatuses(v)...)
			case fieldTemplateStatus:
				var v templateStatusValue
				d := json.NewDecoder(bytes.NewReader(ch.Value))
				d.UseNumber()
				if err := d.Decode(&v); err != nil {
					return Envelope{}, fmt.Errorf("whatsapp: webhook template status value: %w", err)
				}
				if v.ID.String() == "" || v.Event == "" {
					continue
				}
				reason := v.Reason
				if strings.EqualFold(reason, "NONE") {
					reason = ""
				}
				var at time.Time
				if e.Time > 0 {
					at = time.Unix(e.Time, 0).UTC()
				}
				out.TemplateStatuses = append(out.TemplateStatuses, TemplateStatus{BusinessAccountID: e.ID, ID: v.ID.String(), Name: v.Name,
					Language: v.Language, Status: strings.ToUpper(v.Event), Reason: reason, At: at})
			}
		}
	}
	return out, nil
}

// messageStatuses returns the statuses of a messages value; one without a message id or a
// status says nothing about any message and is dropped.
func messageStatuses(v messagesValue) []MessageStatus {
	var out []MessageStatus
	for _, st := range v.Statuses {
		if st.ID == "" || st.Status == "" {
			continue
		}
		ms := MessageStatus{PhoneNumberID: v.Metadata.PhoneNumberID, MessageID: st.ID, Status: strings.ToLower(st.Status),
			RecipientID: st.RecipientID, At: unixTime(string(st.Timestamp))}
		if len(st.Errors) > 0 {
			ms.ErrorCode, ms.ErrorTitle = string(st.Errors[0].Code), st.Errors[0].Title
		}
		out = append(out, ms)
	}
	return out
}

// unixTime reads a timestamp in Unix seconds; zero when it is not one.
func unixTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

func messageUpdates(v messagesValue) []Update {
	names := map[string]string{}
	for _, c := range v.Contacts {
		names[c.WaID] = c.Profile.Name
	}
	var out []Update
	for _, m := range v.Messages {
		in := channel.Inbound{UpdateID: m.ID, UserID: m.From, FirstName: names[m.From]}
		if s, err := strconv.ParseInt(m.Timestamp, 10, 64); err == nil {
			in.At = time.Unix(s, 0).UTC()
		}
		switch {
		case m.Type == "text" && m.Text != nil:
			in.Text = m.Text.Body
		case m.Type == "interactive" && m.Interactive != nil && m.Interactive.ButtonReply != nil:
			in.Payload = m.Interactive.ButtonReply.ID
		case m.Type == "interactive" && m.Interactive != nil && m.Interactive.ListReply != nil:
			in.Payload = m.Interactive.ListReply.ID
		case m.Type == "button" && m.Button != nil:
			in.Payload = cmp.Or(m.Button.Payload, m.Button.Text)
		default:
			continue
		}
		// A message without text or payload (an empty reply id) carries nothing to react to.
		if in.UpdateID == "" || in.UserID == "" || in.Text == "" && in.Payload == "" {
			continue
		}
		out = append(out, Update{PhoneNumberID: v.Metadata.PhoneNumberID, Inbound: in})
	}
	return out
}

// Parse returns the inbound messages of a verified webhook body, of every phone number it
// names. The webhooks family uses ParseEnvelope instead, which also says which number each
// message was sent to and returns template status changes and message statuses.
func (a *Adapter) Parse(body []byte) ([]channel.Inbound, error) {
	env, err := ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	out := make([]channel.Inbound, 0, len(env.Updates))
	for _, u := range env.Updates {
		out = append(out, u.Inbound)
	}
	return out, nil
}
