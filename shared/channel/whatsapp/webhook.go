package whatsapp

import (
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

// envelope is the webhook body: {object, entry[].changes[].{field, value}}.
type envelope struct {
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
}

type templateStatusValue struct {
	Event    string      `json:"event"`
	ID       json.Number `json:"message_template_id"`
	Name     string      `json:"message_template_name"`
	Language string      `json:"message_template_language"`
	Reason   string      `json:"reason"`
}

// Webhook fields this package reads; the others (statuses of sent messages arrive within
// "messages"; quality and category updates) are ignored.
const (
	fieldMessages       = "messages"
	fieldTemplateStatus = "message_template_status_update"
)

// ParseEnvelope reads a verified webhook body: inbound messages (text; reply button and
// list presses and template quick replies as Payload), each with the phone number id it
// was sent to, and template status changes. Message kinds without text or payload (media,
// locations, reactions) and delivery statuses of sent messages yield nothing.
func ParseEnvelope(body []byte) ([]Update, []TemplateStatus, error) {
	var env envelope
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return nil, nil, fmt.Errorf("whatsapp: webhook body: %w", err)
	}
	if env.Object != "whatsapp_business_account" {
		return nil, nil, fmt.Errorf("whatsapp: webhook object %q is not whatsapp_business_account", env.Object)
	}
	var (
		updates  []Update
		statuses []TemplateStatus
	)
	for _, e := range env.Entry {
		for _, ch := range e.Changes {
			switch ch.Field {
			case fieldMessages:
				var v messagesValue
				if err := json.Unmarshal(ch.Value, &v); err != nil {
					return nil, nil, fmt.Errorf("whatsapp: webhook messages value: %w", err)
				}
				updates = append(updates, messageUpdates(v)...)
			case fieldTemplateStatus:
				var v templateStatusValue
				d := json.NewDecoder(strings.NewReader(string(ch.Value)))
				d.UseNumber()
				if err := d.Decode(&v); err != nil {
					return nil, nil, fmt.Errorf("whatsapp: webhook template status value: %w", err)
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
				statuses = append(statuses, TemplateStatus{BusinessAccountID: e.ID, ID: v.ID.String(), Name: v.Name,
					Language: v.Language, Status: strings.ToUpper(v.Event), Reason: reason, At: at})
			}
		}
	}
	return updates, statuses, nil
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
// message was sent to and returns template status changes.
func (a *Adapter) Parse(body []byte) ([]channel.Inbound, error) {
	updates, _, err := ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	out := make([]channel.Inbound, 0, len(updates))
	for _, u := range updates {
		out = append(out, u.Inbound)
	}
	return out, nil
}
