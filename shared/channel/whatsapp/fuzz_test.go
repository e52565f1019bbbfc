package whatsapp_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/botplatform/api/shared/channel/channeltest"
	"github.com/botplatform/api/shared/channel/whatsapp"
)

// FuzzWebhook runs a WhatsApp Business Account notification through what the webhook does
// with it (the signature check, the envelope, Parse): never a panic; only a body signed with
// the app secret passes; what Parse returns may be enqueued.
func FuzzWebhook(f *testing.F) {
	const appSecret = "app-secret"
	sign := func(b []byte) string {
		m := hmac.New(sha256.New, []byte(appSecret))
		m.Write(b)
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}
	for _, s := range []string{
		`{"object":"whatsapp_business_account","entry":[{"id":"waba1","time":1,"changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550001","phone_number_id":"pn1"},"contacts":[{"profile":{"name":"Ann"},"wa_id":"4915"}],"messages":[{"from":"4915","id":"wamid.A","timestamp":"1790000000","type":"text","text":{"body":"hi"}}]}}]}]}`,
		`{"object":"whatsapp_business_account","entry":[{"id":"waba1","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"pn1"},"messages":[{"from":"4915","id":"wamid.B","timestamp":"1","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"yes","title":"Yes"}}}]}}]}]}`,
		`{"object":"whatsapp_business_account","entry":[{"id":"waba1","changes":[{"field":"message_template_status_update","value":{"event":"APPROVED","message_template_id":123,"message_template_name":"hello","message_template_language":"en_US"}}]}]}`,
		`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"statuses":[{"id":"wamid.C","status":"read"}]}}]}]}`,
		`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"pn1"},"statuses":[{"id":"wamid.D","status":"failed","timestamp":"1750030080","recipient_id":"4915","errors":[{"code":131026,"title":"Message undeliverable"}]}]}}]}]}`,
		`{"object":"page"}`, `{}`, `[]`, `{"entry":[{"changes":[{"value":null}]}]}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	a := whatsapp.New(whatsapp.Config{AppSecret: appSecret})
	f.Fuzz(func(t *testing.T, body []byte, signed bool) {
		header := "sha256=0000"
		if signed {
			header = sign(body)
		}
		if err := a.VerifySignature(header, body); (err == nil) != signed {
			t.Fatalf("%q signed=%v: VerifySignature %v", body, signed, err)
		}
		if env, err := whatsapp.ParseEnvelope(body); err == nil {
			for _, st := range env.MessageStatuses {
				if st.MessageID == "" || st.Status == "" || st.Status != strings.ToLower(st.Status) {
					t.Fatalf("%q: status %+v has no message id or status, or one not in lower case", body, st)
				}
			}
		}
		updates, err := a.Parse(body)
		if err != nil {
			return
		}
		channeltest.CheckInbound(t, body, updates)
	})
}
