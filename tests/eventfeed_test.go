package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// The platform's own activity reaches the event log that funnels and experiments report
// over: publishing a reaction, a Telegram user's first message, the run it starts and the
// messages it sends, each once, as the subscriber's.
func TestPlatformActivityFeedsTheEventLog(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s := c.s
	welcome := c.publish(t, `{"name":"Welcome","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello!"},{"id":"more","type":"send_text","text":"Nice to meet you"}]}`)

	ann := fake.User{ID: 6001, FirstName: "Ann"}
	first := c.tg.TextUpdate(ann, "/start")
	c.deliver(t, first)
	c.deliver(t, first) // Telegram's redelivery of the same update: recorded once
	eventually(t, 10*time.Second, "the welcome messages", func() bool { return len(c.tg.Sent(ann.ID)) >= 2 })
	sub := c.subscriber(t, ann)

	from := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	to := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	names := func() map[string]int {
		r := s.get(s.demo.Token, "/api/bots/"+s.demo.BotID+"/events?limit=100&from="+from+"&to="+to)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		n := map[string]int{}
		for _, e := range r.JSON(t)["data"].([]any) {
			ev := e.(map[string]any)
			n[ev["name"].(string)]++
			switch ev["name"] {
			case "reaction_published":
				assert.Equal(t, welcome, ev["properties"].(map[string]any)["reaction_id"])
			default:
				assert.Equal(t, sub, ev["subscriber_id"], "%v is the subscriber's", ev["name"])
				assert.Equal(t, "telegram", ev["channel"])
			}
		}
		return n
	}
	want := map[string]int{"reaction_published": 1, "subscriber_created": 1, "message_received": 1,
		"reaction_started": 1, "message_sent": 2, "reaction_completed": 1}
	eventually(t, 10*time.Second, "the run's events", func() bool { return assert.ObjectsAreEqual(want, names()) })

	// A second /start: a second run, but the subscriber was created once.
	c.deliver(t, c.tg.TextUpdate(ann, "/start"))
	eventually(t, 10*time.Second, "the second run's messages", func() bool { return len(c.tg.Sent(ann.ID)) >= 4 })
	want["message_received"], want["reaction_started"], want["message_sent"], want["reaction_completed"] = 2, 2, 4, 2
	eventually(t, 10*time.Second, "the second run's events", func() bool { return assert.ObjectsAreEqual(want, names()) })
	assert.Equal(t, want, names())
}
