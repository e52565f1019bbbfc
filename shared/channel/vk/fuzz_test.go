package vk_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/channeltest"
	"github.com/botplatform/api/shared/channel/vk"
)

// FuzzWebhook runs a Callback API delivery through what the webhook does with it (the
// confirmation check, Verify, Parse): never a panic; a delivery that passes Verify carries
// the channel's secret key and community; what Parse returns may be enqueued.
func FuzzWebhook(f *testing.F) {
	const group = 12345
	secret := vk.SecretKey("webhook-secret")
	for _, s := range []string{
		`{"type":"confirmation","group_id":12345,"secret":"` + secret + `"}`,
		`{"type":"message_new","group_id":12345,"event_id":"e1","v":"5.199","secret":"` + secret + `","object":{"message":{"id":7,"date":1790000000,"from_id":42,"peer_id":42,"text":"hi"},"client_info":{"lang_id":3}}}`,
		`{"type":"message_new","group_id":12345,"event_id":"e2","secret":"` + secret + `","object":{"message":{"id":8,"date":1,"from_id":42,"peer_id":42,"text":"","payload":"{\"p\":\"yes\"}"}}}`,
		`{"type":"message_event","group_id":12345,"event_id":"e3","secret":"` + secret + `","object":{"user_id":42,"peer_id":42,"event_id":"x","payload":{"p":"x"},"conversation_message_id":3}}`,
		`{"type":"message_new","group_id":12345,"event_id":"e4","secret":"` + secret + `","object":{"message":{"from_id":42,"peer_id":2000000001,"text":"group chat"}}}`,
		`{"type":"wall_post_new","group_id":12345,"secret":"wrong"}`,
		`{"type":"message_new","group_id":1,"secret":"` + secret + `","object":null}`,
		`{}`, `[]`, `{"type":`,
	} {
		f.Add([]byte(s))
	}
	creds, _ := json.Marshal(map[string]any{"access_token": "vk1.a.token", "group_id": group, "confirmation_code": "abc123"})
	conn := channel.Connection{Credentials: creds, WebhookSecret: "webhook-secret"}
	a := vk.New(vk.Config{})
	f.Fuzz(func(t *testing.T, body []byte) {
		code, confirmation, err := vk.ConfirmationResponse(body, conn)
		if confirmation && err == nil && code != "abc123" {
			t.Fatalf("%q: confirmed with %q", body, code)
		}
		if err := a.Verify(nil, body, conn); err != nil {
			if !errors.Is(err, channel.ErrUnauthenticWebhook) {
				t.Fatalf("%q: Verify: %v", body, err)
			}
		} else {
			var e struct {
				Secret  string `json:"secret"`
				GroupID int64  `json:"group_id"`
			}
			if json.Unmarshal(body, &e) != nil || e.Secret != secret || e.GroupID != group {
				t.Fatalf("%q passed Verify", body)
			}
		}
		updates, err := a.Parse(body)
		if err != nil {
			return
		}
		channeltest.CheckInbound(t, body, updates)
	})
}
