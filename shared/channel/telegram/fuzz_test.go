package telegram_test

import (
	"testing"
	"time"

	"github.com/botplatform/api/shared/channel/channeltest"
	"github.com/botplatform/api/shared/channel/telegram"
)

// FuzzParse: whatever a webhook delivery holds, Parse never panics and what it returns is an
// update the webhooks may enqueue.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"update_id":1,"message":{"message_id":9,"date":1790000000,"chat":{"id":1001,"type":"private"},"from":{"id":1001,"is_bot":false,"first_name":"Ann","language_code":"pt-BR"},"text":"/start promo42"}}`,
		`{"update_id":2,"callback_query":{"id":"42","from":{"id":1001,"is_bot":false,"first_name":"Ann"},"message":{"message_id":1,"date":1,"chat":{"id":1001,"type":"private"}},"chat_instance":"-1","data":"answer:yes"}}`,
		`{"update_id":3,"message":{"message_id":9,"date":1,"chat":{"id":1001,"type":"private"},"from":{"id":1001,"is_bot":false,"first_name":"Ann"},"caption":"look","photo":[{"file_id":"x"}]}}`,
		`{"update_id":4,"edited_message":{"message_id":1,"date":1,"chat":{"id":1001,"type":"private"},"text":"x"}}`,
		`{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":-42,"type":"group"},"from":{"id":1001,"is_bot":false},"text":"hi"}}`,
		`{"update_id":-9223372036854775808,"message":{"chat":{"type":"private"},"from":{"id":1},"text":"\u0000"}}`,
		`{"message":{"text":"x"}}`, `[]`, `{"update_id":`, `null`,
	} {
		f.Add([]byte(s))
	}
	a := telegram.New(telegram.Config{Now: func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }})
	f.Fuzz(func(t *testing.T, body []byte) {
		updates, err := a.Parse(body)
		if err != nil {
			if len(updates) > 0 {
				t.Fatalf("%q: updates with an error", body)
			}
			return
		}
		if len(updates) > 1 {
			t.Fatalf("%q: %d updates from one Update", body, len(updates))
		}
		channeltest.CheckInbound(t, body, updates)
	})
}
