package vk

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
)

// Acknowledgement is the plain-text answer VK expects to every event but the confirmation;
// anything else (or no answer within a few seconds) makes VK deliver the event again.
const Acknowledgement = "ok"

// envelope is the part of a Callback API body common to every event.
type envelope struct {
	Type    string          `json:"type"`
	GroupID int64           `json:"group_id"`
	EventID string          `json:"event_id"`
	Secret  string          `json:"secret"`
	Object  json.RawMessage `json:"object"`
}

func unauthentic(msg string) error {
	return &channel.Error{Kind: channel.ErrUnauthenticWebhook, Provider: channel.VK, Message: msg}
}

// Verify checks that a Callback API delivery comes from VK for conn: the body's secret must
// be the callback server's secret key (compared in constant time) and its group_id the
// channel's community.
func (a *Adapter) Verify(_ *http.Request, body []byte, conn channel.Connection) error {
	_, err := verify(body, conn)
	return err
}

func verify(body []byte, conn channel.Connection) (envelope, error) {
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil || e.Type == "" {
		return envelope{}, unauthentic("the body is not a Callback API event")
	}
	st, err := credentials(conn)
	if err != nil {
		return envelope{}, err
	}
	if conn.WebhookSecret == "" {
		return envelope{}, unauthentic("the channel has no webhook secret")
	}
	want := SecretKey(conn.WebhookSecret)
	if subtle.ConstantTimeCompare([]byte(e.Secret), []byte(want)) != 1 {
		return envelope{}, unauthentic("the secret key does not match")
	}
	if e.GroupID != st.GroupID {
		return envelope{}, unauthentic("the event is for another community")
	}
	return e, nil
}

// ConfirmationResponse answers VK's confirmation event, which VK sends to a new callback
// server's address and which must be answered with the community's confirmation code as
// plain text. For any other event it returns isConfirmation false (answer Acknowledgement
// after Verify and Parse). A confirmation that fails verification (secret, community) is an
// ErrUnauthenticWebhook error.
func ConfirmationResponse(body []byte, conn channel.Connection) (code string, isConfirmation bool, err error) {
	var e envelope
	if json.Unmarshal(body, &e) != nil || e.Type != "confirmation" {
		return "", false, nil
	}
	if _, err := verify(body, conn); err != nil {
		return "", true, err
	}
	st, err := credentials(conn)
	if err != nil {
		return "", true, err
	}
	if st.ConfirmationCode == "" {
		return "", true, errors.New("vk: the channel has no confirmation code")
	}
	return st.ConfirmationCode, true, nil
}

// message is the message object of message_new (API 5.103 and later).
type message struct {
	ID                    int64  `json:"id"`
	ConversationMessageID int64  `json:"conversation_message_id"`
	Date                  int64  `json:"date"`
	FromID                int64  `json:"from_id"`
	PeerID                int64  `json:"peer_id"`
	Text                  string `json:"text"`
	Payload               string `json:"payload"`
}

// langs maps client_info.lang_id to a language tag.
var langs = map[int]string{0: "ru", 1: "uk", 2: "be", 3: "en", 4: "es", 5: "fi", 6: "de", 7: "it"}

// Parse turns a verified Callback API body into updates: message_new (a text, or a pressed
// keyboard button's payload) and message_event (a callback button) from users in a private
// dialog with the community. Everything else (confirmation, messages in group chats, other
// event types) yields none. UpdateID is VK's event_id, the same on every redelivery.
func (a *Adapter) Parse(body []byte) ([]channel.Inbound, error) {
	var e envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, errors.New("vk: the body is not a Callback API event")
	}
	switch e.Type {
	case "message_new":
		return parseMessage(e)
	case "message_event":
		return a.parseButton(e)
	default:
		return nil, nil
	}
}

func parseMessage(e envelope) ([]channel.Inbound, error) {
	var obj struct {
		Message    *message `json:"message"`
		ClientInfo struct {
			LangID *int `json:"lang_id"`
		} `json:"client_info"`
	}
	if err := json.Unmarshal(e.Object, &obj); err != nil || obj.Message == nil {
		return nil, errors.New("vk: message_new without a message (is the callback server's API version 5.103 or later?)")
	}
	m := obj.Message
	// Only users (positive ids) in their private dialog with the community: a group chat's
	// peer is another id, and the runtime answers the user, not the chat.
	if m.FromID <= 0 || m.PeerID != m.FromID {
		return nil, nil
	}
	in := channel.Inbound{
		UpdateID: updateID(e, "m", m.ConversationMessageID, m.ID),
		UserID:   strconv.FormatInt(m.FromID, 10),
		At:       time.Unix(m.Date, 0).UTC(),
		Text:     m.Text,
	}
	if obj.ClientInfo.LangID != nil {
		in.Locale = langs[*obj.ClientInfo.LangID]
	}
	if m.Payload != "" {
		p, start := payload([]byte(m.Payload))
		switch {
		case start:
			// The community's Start button: the start trigger, as Telegram's /start.
			in.Text = "/start"
		case p != "":
			in.Text, in.Payload = "", p
		}
	}
	if in.Text == "" && in.Payload == "" {
		return nil, nil // a sticker, a photo without text, ...
	}
	return []channel.Inbound{in}, nil
}

func (a *Adapter) parseButton(e envelope) ([]channel.Inbound, error) {
	var obj struct {
		UserID                int64           `json:"user_id"`
		PeerID                int64           `json:"peer_id"`
		Payload               json.RawMessage `json:"payload"`
		ConversationMessageID int64           `json:"conversation_message_id"`
	}
	if err := json.Unmarshal(e.Object, &obj); err != nil {
		return nil, errors.New("vk: message_event with an unreadable object")
	}
	if obj.UserID <= 0 || obj.PeerID != obj.UserID {
		return nil, nil
	}
	p, _ := payload(obj.Payload)
	if p == "" {
		return nil, nil
	}
	return []channel.Inbound{{
		UpdateID: updateID(e, "e", obj.ConversationMessageID, 0),
		UserID:   strconv.FormatInt(obj.UserID, 10),
		Payload:  p,
		At:       a.now().UTC().Truncate(time.Second),
	}}, nil
}

// payload reads a button payload: ours is {"p": "..."}; VK's Start button sends
// {"command": "start"}. A JSON string holding the object (message_new) is unwrapped too.
func payload(raw []byte) (p string, start bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(s)
	}
	var v struct {
		P       *string `json:"p"`
		Command string  `json:"command"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	if v.P != nil {
		return *v.P, false
	}
	return "", v.Command == "start"
}

// updateID is VK's event_id; events without one (an older callback server) fall back to the
// message's ids, prefixed by kind so the two never collide.
func updateID(e envelope, kind string, convID, id int64) string {
	if e.EventID != "" {
		return e.EventID
	}
	return kind + strings.Join([]string{strconv.FormatInt(e.GroupID, 10), strconv.FormatInt(convID, 10), strconv.FormatInt(id, 10)}, ":")
}
