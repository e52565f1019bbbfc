package vk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// APIVersion is the Callback API version the events are shaped for.
const APIVersion = "5.199"

// Event is one Callback API request body as VK sends it.
type Event struct {
	Type    string `json:"type"`
	GroupID int64  `json:"group_id"`
	// EventID is VK's id of the event; a retried delivery carries the same one.
	EventID string          `json:"event_id,omitempty"`
	V       string          `json:"v,omitempty"`
	Object  json.RawMessage `json:"object,omitempty"`
	// Secret is the callback server's secret key; Post fills it.
	Secret string `json:"secret,omitempty"`
}

// JSON is the body VK posts.
func (e Event) JSON() []byte { return fakehttp.MustJSON(e) }

// Confirmation is the event VK sends to confirm a callback server's address.
func Confirmation(groupID int64) Event {
	return Event{Type: "confirmation", GroupID: groupID}
}

// InMessage describes an incoming message for NewMessage.
type InMessage struct {
	FromID int64
	ID     int64 // the message id in the community's dialog with the user
	Text   string
	// Payload is the pressed button's payload as VK carries it (a JSON string, e.g. {"p":"x"});
	// "" when the message was typed.
	Payload string
	Date    time.Time
	// LangID is client_info.lang_id: 0 ru, 1 uk, 2 be, 3 en, ...
	LangID int
}

// NewMessage is a message_new event: a user wrote to the community.
func NewMessage(groupID int64, m InMessage) Event {
	if m.Date.IsZero() {
		m.Date = time.Now()
	}
	msg := map[string]any{
		"date": m.Date.Unix(), "from_id": m.FromID, "id": m.ID, "out": 0, "version": 10000000 + m.ID,
		"attachments": []any{}, "conversation_message_id": m.ID, "fwd_messages": []any{},
		"important": false, "is_hidden": false, "peer_id": m.FromID, "random_id": 0, "text": m.Text,
	}
	if m.Payload != "" {
		msg["payload"] = m.Payload
	}
	obj := map[string]any{
		"message": msg,
		"client_info": map[string]any{
			"button_actions":  []string{"text", "vkpay", "open_app", "location", "open_link", "callback", "intent_subscribe", "intent_unsubscribe"},
			"keyboard":        true,
			"inline_keyboard": true,
			"carousel":        true,
			"lang_id":         m.LangID,
		},
	}
	return Event{Type: "message_new", GroupID: groupID, EventID: randomHex(20), V: APIVersion, Object: fakehttp.MustJSON(obj)}
}

// ButtonEvent is a message_event event: a user pressed a callback button whose payload is
// payload (a JSON object, e.g. {"p":"x"}).
func ButtonEvent(groupID, userID int64, payload string) Event {
	obj := map[string]any{
		"user_id": userID, "peer_id": userID, "event_id": randomHex(6),
		"payload": json.RawMessage(payload), "conversation_message_id": 12,
	}
	return Event{Type: "message_event", GroupID: groupID, EventID: randomHex(20), V: APIVersion, Object: fakehttp.MustJSON(obj)}
}

// Other is an event of another type (group_join, wall_post_new, ...), with object obj.
func Other(groupID int64, typ string, obj any) Event {
	return Event{Type: typ, GroupID: groupID, EventID: randomHex(20), V: APIVersion, Object: fakehttp.MustJSON(obj)}
}

// Answer is what the webhook answered VK.
type Answer struct {
	Status int
	Body   string
}

// Post sends e to url as VK does (POST, application/json) with secret as the server's
// secret key; retry > 0 adds X-Retry-Counter as VK does on redeliveries.
func Post(url, secret string, e Event, retry int) (Answer, error) {
	e.Secret = secret
	h := http.Header{"User-Agent": {"VKCallbackAPI"}}
	if retry > 0 {
		h.Set("X-Retry-Counter", strconv.Itoa(retry))
	}
	status, body, err := fakehttp.Post(url, e.JSON(), h)
	return Answer{Status: status, Body: string(body)}, err
}

// Confirm plays VK's confirmation of a registered callback server: it posts the
// confirmation event to the server's URL with its secret key, and the server becomes ok when
// the answer is exactly the community's confirmation code (failed otherwise).
func (s *Server) Confirm(groupID, serverID int64) (Answer, error) {
	s.mu.Lock()
	var cs *CallbackServer
	for _, c := range s.servers {
		if c.GroupID == groupID && c.ID == serverID {
			cs = c
		}
	}
	if cs == nil {
		s.mu.Unlock()
		return Answer{}, fmt.Errorf("fake vk: no callback server %d in group %d", serverID, groupID)
	}
	target, secret, code := cs.URL, cs.SecretKey, s.groups[groupID].ConfirmationCode
	s.mu.Unlock()

	e := Confirmation(groupID)
	a, err := Post(target, secret, e, 0)
	e.Secret = secret
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delivered.Add(Delivery{URL: target, Body: e.JSON(), Status: a.Status, Answer: a.Body})
	cs.Status = "failed"
	if err == nil && a.Status == http.StatusOK && strings.TrimSpace(a.Body) == code {
		cs.Status = "ok"
	}
	return a, err
}

// Deliver sends e to every confirmed callback server of its community that subscribed to its
// type (setCallbackSettings with <type>=1), with each server's secret key, and returns the
// answers. VK expects "ok"; it would retry anything else.
func (s *Server) Deliver(e Event) ([]Answer, error) {
	type target struct{ url, secret string }
	s.mu.Lock()
	var targets []target
	for _, cs := range s.servers {
		if cs.GroupID == e.GroupID && cs.Status == "ok" && cs.Settings[e.Type] == "1" {
			targets = append(targets, target{cs.URL, cs.SecretKey})
		}
	}
	s.mu.Unlock()
	var out []Answer
	for _, tg := range targets {
		a, err := Post(tg.url, tg.secret, e, 0)
		e.Secret = tg.secret
		s.mu.Lock()
		s.delivered.Add(Delivery{URL: tg.url, Body: e.JSON(), Status: a.Status, Answer: a.Body})
		s.mu.Unlock()
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, nil
}
