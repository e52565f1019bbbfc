package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/docs"
	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// eventually polls cond until it holds or the deadline passes. It polls; it never waits a
// fixed time for something to have happened.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// texts returns the texts the fake accepted for a chat, in order.
func texts(tg *fake.Server, chat int64) []string {
	out := []string{}
	for _, m := range tg.Sent(chat) {
		out = append(out, m.Text)
	}
	return out
}

// conversation is a local process with a Telegram channel connected to its demo bot.
type conversation struct {
	s    *server
	tg   *fake.Server
	bot  fake.Bot
	hook fake.Webhook
	dir  string
	args []string
}

func startConversation(t *testing.T) *conversation {
	t.Helper()
	tg := fake.New(t)
	bot := tg.AddBot("shop_bot")
	port := freePort(t)
	c := &conversation{tg: tg, bot: bot, dir: t.TempDir(),
		args: []string{"--addr", "127.0.0.1:" + port, "--public-url", "http://127.0.0.1:" + port, "--telegram-base-url", tg.URL}}
	c.s = startWith(t, c.dir, c.args...)
	c.s.secret(bot.Token)
	c.s.admin("channel", "connect", "--bot", c.s.demo.BotID, "--type", "telegram", "--token", bot.Token, "--base-url", tg.URL)
	var ok bool
	c.hook, ok = tg.Webhook(bot)
	require.True(t, ok, "the channel registered its webhook")
	return c
}

// restart stops the process and starts another on the same data and address.
func (c *conversation) restart(t *testing.T) {
	t.Helper()
	c.s.stop()
	c.s = startWith(t, c.dir, c.args...)
	c.s.secret(c.bot.Token)
}

// publish creates a reaction from its JSON and publishes it.
func (c *conversation) publish(t *testing.T, reaction string) string {
	t.Helper()
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(reaction), &body))
	r := c.s.post(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/reactions", body)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	id := r.JSON(t)["id"].(string)
	r = c.s.post(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/reactions/"+id+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	return id
}

// deliver sends an update to the webhook as Telegram does and requires a 200.
func (c *conversation) deliver(t *testing.T, update []byte) {
	t.Helper()
	status, err := c.tg.Deliver(c.bot, update)
	require.NoError(t, err)
	require.Equal(t, 200, status)
}

// subscriber finds the subscriber of a Telegram user.
func (c *conversation) subscriber(t *testing.T, user fake.User) string {
	t.Helper()
	r := c.s.get(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/subscribers?channel=telegram&external_id="+fmt.Sprint(user.ID))
	require.Equal(t, 200, r.Status, "%s", r.Body)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &list))
	require.Len(t, list.Data, 1)
	return list.Data[0].ID
}

type trace struct {
	ID              string         `json:"id"`
	Status          string         `json:"status"`
	EndReason       *string        `json:"end_reason"`
	ReactionID      string         `json:"reaction_id"`
	ReactionVersion int            `json:"reaction_version"`
	Trigger         map[string]any `json:"trigger"`
	Waiting         map[string]any `json:"waiting"`
	Error           map[string]any `json:"error"`
	StepCount       int            `json:"step_count"`
	Steps           []struct {
		StepID   string         `json:"step_id"`
		Type     string         `json:"type"`
		Attempts int            `json:"attempts"`
		Decision map[string]any `json:"decision"`
		Outcome  map[string]any `json:"outcome"`
		Error    map[string]any `json:"error"`
	} `json:"steps"`
}

// conforms checks a response against the operation's documented response.
func conforms(t *testing.T, method, template, path string, r resp) {
	t.Helper()
	doc, err := openAPIDoc()
	require.NoError(t, err)
	item := doc.Paths.Value(template)
	require.NotNil(t, item, template)
	op := item.GetOperation(method)
	require.NotNil(t, op, method+" "+template)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: httptest.NewRequest(method, path, nil),
			Route:   &routers.Route{Spec: doc, Path: template, PathItem: item, Method: method, Operation: op},
		},
		Status: r.Status, Header: r.Header, Body: io.NopCloser(bytes.NewReader(r.Body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	assert.NoError(t, openapi3filter.ValidateResponse(context.Background(), in), "%s %s: %s", method, path, r.Body)
}

// openAPIDoc is the served OpenAPI document, loaded once for the package: loading it is
// about a second under the race detector, and conforms runs hundreds of times. Validation
// only reads it.
var openAPIDoc = sync.OnceValues(func() (*openapi3.T, error) { return openapi3.NewLoader().LoadFromData(docs.OpenAPI) })

// executions lists the subscriber's runs, newest first.
func (c *conversation) executions(t *testing.T, sub string) []trace {
	t.Helper()
	r := c.s.get(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/subscribers/"+sub+"/executions")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/subscribers/{subscriberID}/executions", "/api/bots/"+c.s.demo.BotID+"/subscribers/"+sub+"/executions", r)
	var list struct {
		Data []trace `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &list))
	return list.Data
}

func (c *conversation) execution(t *testing.T, id string) trace {
	t.Helper()
	r := c.s.get(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/executions/"+url.PathEscape(id))
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/executions/{executionID}", "/api/bots/"+c.s.demo.BotID+"/executions/"+id, r)
	var tr trace
	require.NoError(t, json.Unmarshal(r.Body, &tr))
	return tr
}

// counter reads today's total of a stats metric.
func (c *conversation) counter(t *testing.T, metric string) int {
	t.Helper()
	day := time.Now().UTC().Truncate(24 * time.Hour)
	r := c.s.get(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/stats?from="+day.Format(time.RFC3339)+"&to="+day.Add(24*time.Hour).Format(time.RFC3339))
	require.Equal(t, 200, r.Status, "%s", r.Body)
	var st struct {
		Total map[string]int `json:"total"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &st))
	return st.Total[metric]
}

// A Telegram conversation on the real local process: /start runs a published reaction with
// a condition and a label; the messages reach the (fake) Bot API; the trace reads back over
// the API; a redelivered update runs once; a forged secret is refused with nothing enqueued.
func TestConversationStartConditionLabel(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s := c.s
	r := s.post(s.demo.Token, "/api/bots/"+s.demo.BotID+"/labels", map[string]any{"name": "welcomed"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	label := r.JSON(t)["id"].(string)
	welcome := c.publish(t, fmt.Sprintf(`{"name":"Welcome","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello!"},
		{"id":"check","type":"condition","conditions":[{"label_id":%q,"op":"has"}],"then":"back","else":"new"},
		{"id":"back","type":"send_text","text":"Welcome back"},
		{"id":"done","type":"end"},
		{"id":"new","type":"send_text","text":"Nice to meet you"},
		{"id":"tag","type":"add_label","label_id":%q}]}`, label, label))
	c.publish(t, `{"name":"Ping","trigger":{"type":"keyword","keywords":["ping"]},"steps":[{"id":"p","type":"send_text","text":"pong"}]}`)

	ann := fake.User{ID: 5001, FirstName: "Ann", LastName: "Lee", LanguageCode: "en"}
	start := c.tg.TextUpdate(ann, "/start")
	c.deliver(t, start)
	eventually(t, 10*time.Second, "the welcome messages", func() bool { return len(c.tg.Sent(ann.ID)) >= 2 })
	assert.Equal(t, []string{"Hello!", "Nice to meet you"}, texts(c.tg, ann.ID))

	sub := c.subscriber(t, ann)
	var runs []trace
	eventually(t, 10*time.Second, "the run completes", func() bool {
		runs = c.executions(t, sub)
		return len(runs) == 1 && runs[0].Status == "completed"
	})
	run := c.execution(t, runs[0].ID)
	assert.Equal(t, welcome, run.ReactionID)
	assert.Equal(t, 1, run.ReactionVersion)
	assert.Equal(t, "start", run.Trigger["type"])
	assert.Equal(t, "command", run.Trigger["reason"])
	assert.Equal(t, map[string]any{"kind": "text", "length": float64(6)}, run.Trigger["message"])
	require.Len(t, run.Steps, 4)
	ids := []string{}
	for _, st := range run.Steps {
		ids = append(ids, st.StepID)
	}
	assert.Equal(t, []string{"hi", "check", "new", "tag"}, ids)
	assert.Equal(t, "else", run.Steps[1].Decision["branch"])
	assert.NotEmpty(t, run.Steps[0].Outcome["message_id"], "the provider's message id")
	assert.Equal(t, true, run.Steps[3].Outcome["added"])
	raw := s.get(s.demo.Token, "/api/bots/"+s.demo.BotID+"/executions/"+runs[0].ID)
	for _, private := range []string{"/start", "Ann", "Lee", "5001"} {
		assert.NotContains(t, string(raw.Body), private, "the trace holds nothing the subscriber sent or is")
	}
	r = s.get(s.demo.Token, "/api/bots/"+s.demo.BotID+"/subscribers/"+sub)
	require.Equal(t, 200, r.Status)
	assert.Equal(t, []any{label}, r.JSON(t)["labels"])
	assert.Equal(t, "Ann", r.JSON(t)["first_name"])

	// Telegram redelivers the same update (same update_id): one set of messages. A ping
	// sent after it, answered, shows the queue has moved past it.
	c.deliver(t, start)
	// A forged secret: 401, nothing enqueued.
	status, err := c.tg.Post(c.hook.URL, "forged-secret", c.tg.TextUpdate(ann, "ping"))
	require.NoError(t, err)
	assert.Equal(t, 401, status)
	status, err = c.tg.Post(c.hook.URL, "", c.tg.TextUpdate(ann, "ping"))
	require.NoError(t, err)
	assert.Equal(t, 401, status)
	c.deliver(t, c.tg.TextUpdate(ann, "ping"))
	eventually(t, 10*time.Second, "the pong", func() bool { return len(c.tg.Sent(ann.ID)) >= 3 })
	eventually(t, 10*time.Second, "two runs", func() bool { return len(c.executions(t, sub)) == 2 })
	assert.Equal(t, []string{"Hello!", "Nice to meet you", "pong"}, texts(c.tg, ann.ID))
	assert.Equal(t, 2, c.counter(t, "messages_in"), "the duplicate and the forged updates were not counted")
	assert.Equal(t, 3, c.counter(t, "messages_out"))
	assert.Equal(t, 2, c.counter(t, "reactions_started"))
	assert.Contains(t, s.stderr.String(), "webhook delivery failed verification")

	// The second /start takes the other branch: the label is there now.
	c.deliver(t, c.tg.TextUpdate(ann, "/start"))
	eventually(t, 10*time.Second, "welcome back", func() bool { return len(c.tg.Sent(ann.ID)) >= 5 })
	assert.Equal(t, []string{"Hello!", "Nice to meet you", "pong", "Hello!", "Welcome back"}, texts(c.tg, ann.ID))
	for _, m := range c.tg.Sent(ann.ID) {
		assert.Equal(t, c.bot.ID, m.BotID)
	}
}

// A wait suspends a run; the continuation is in the store, so the run resumes after the
// process restarts. A 429 on a step is retried and the message delivered once. A press of
// a button resumes its run.
func TestConversationWaitRestartRateLimitButtons(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	c.publish(t, `{"name":"Later","trigger":{"type":"keyword","keywords":["later"]},"steps":[
		{"id":"a","type":"send_text","text":"wait for it"},
		{"id":"w","type":"wait","seconds":10},
		{"id":"b","type":"send_text","text":"done waiting"}]}`)
	c.publish(t, `{"name":"Two","trigger":{"type":"keyword","keywords":["two"]},"steps":[
		{"id":"a","type":"send_text","text":"first"},
		{"id":"b","type":"send_text","text":"second"}]}`)
	c.publish(t, `{"name":"Menu","trigger":{"type":"keyword","keywords":["menu"]},"steps":[
		{"id":"ask","type":"buttons","text":"Shall we?","buttons":[{"title":"Yes","step_id":"yes"},{"title":"Docs","url":"https://example.com/docs"}]},
		{"id":"yes","type":"send_text","text":"You said yes"}]}`)

	bob := fake.User{ID: 6001, FirstName: "Bob", LanguageCode: "de"}
	c.deliver(t, c.tg.TextUpdate(bob, "later"))
	eventually(t, 10*time.Second, "the first message", func() bool { return len(c.tg.Sent(bob.ID)) >= 1 })
	sub := c.subscriber(t, bob)
	var runs []trace
	eventually(t, 10*time.Second, "the run waits", func() bool {
		runs = c.executions(t, sub)
		return len(runs) == 1 && runs[0].Status == "waiting"
	})
	until, err := time.Parse(time.RFC3339, runs[0].Waiting["until"].(string))
	require.NoError(t, err)
	assert.Equal(t, "time", runs[0].Waiting["for"])
	require.Greater(t, time.Until(until), 500*time.Millisecond, "still waiting when the process stops")

	c.restart(t)
	eventually(t, 40*time.Second, "the message after the wait, sent by the new process", func() bool { return len(c.tg.Sent(bob.ID)) >= 2 })
	assert.Equal(t, []string{"wait for it", "done waiting"}, texts(c.tg, bob.ID))
	assert.False(t, time.Now().Before(until), "not before the wait's end")
	eventually(t, 10*time.Second, "the run completes", func() bool { return c.executions(t, sub)[0].Status == "completed" })

	// Every send answers 429 (retry after 1 s) until the limit is lifted.
	c.tg.RateLimit(1)
	c.deliver(t, c.tg.TextUpdate(bob, "two"))
	eventually(t, 10*time.Second, "the run retries its step", func() bool {
		runs = c.executions(t, sub)
		return len(runs) == 2 && runs[0].Status == "running" && runs[0].Error != nil
	})
	assert.Equal(t, "rate_limited", runs[0].Error["kind"])
	assert.Equal(t, "a", runs[0].Error["step_id"])
	c.tg.RateLimit(0)
	eventually(t, 20*time.Second, "both messages", func() bool { return len(c.tg.Sent(bob.ID)) >= 4 })
	eventually(t, 10*time.Second, "the run completes", func() bool { return c.executions(t, sub)[0].Status == "completed" })
	assert.Equal(t, []string{"wait for it", "done waiting", "first", "second"}, texts(c.tg, bob.ID), "each once")
	run := c.execution(t, c.executions(t, sub)[0].ID)
	require.Len(t, run.Steps, 2)
	assert.GreaterOrEqual(t, run.Steps[0].Attempts, 2)
	assert.Nil(t, run.Error)

	// A button of the run resumes it at its step; the press is acknowledged to Telegram.
	c.deliver(t, c.tg.TextUpdate(bob, "menu"))
	eventually(t, 10*time.Second, "the menu", func() bool { return len(c.tg.Sent(bob.ID)) >= 5 })
	menu := c.tg.Sent(bob.ID)[4]
	require.Len(t, menu.Buttons, 2)
	var yes, docs fake.Button
	for _, row := range menu.Buttons {
		for _, b := range row {
			if b.Text == "Yes" {
				yes = b
			} else {
				docs = b
			}
		}
	}
	assert.True(t, strings.HasPrefix(yes.CallbackData, "~"), "a payload of the run: %q", yes.CallbackData)
	assert.Equal(t, "https://example.com/docs", docs.URL)
	eventually(t, 10*time.Second, "the run waits for a press", func() bool {
		r := c.executions(t, sub)[0]
		return r.Status == "waiting" && r.Waiting["for"] == "button"
	})
	press, callbackID := c.tg.CallbackUpdate(c.bot, bob, yes.CallbackData)
	c.deliver(t, press)
	eventually(t, 10*time.Second, "the answer to the press", func() bool { return len(c.tg.Sent(bob.ID)) >= 6 })
	assert.Equal(t, "You said yes", c.tg.Sent(bob.ID)[5].Text)
	eventually(t, 10*time.Second, "the press acknowledged", func() bool {
		for _, a := range c.tg.Answers() {
			if a.CallbackQueryID == callbackID {
				return true
			}
		}
		return false
	})

	// A user who blocked the bot: the run fails, recorded in its trace.
	eve := fake.User{ID: 7001, FirstName: "Eve"}
	c.tg.Block(eve.ID)
	c.deliver(t, c.tg.TextUpdate(eve, "two"))
	eveSub := ""
	eventually(t, 10*time.Second, "eve's subscriber", func() bool {
		r := c.s.get(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/subscribers?channel=telegram&external_id=7001")
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(r.Body, &list)
		if len(list.Data) == 1 {
			eveSub = list.Data[0].ID
		}
		return eveSub != ""
	})
	eventually(t, 10*time.Second, "the run fails", func() bool {
		r := c.executions(t, eveSub)
		return len(r) == 1 && r[0].Status == "failed"
	})
	failed := c.executions(t, eveSub)[0]
	assert.Equal(t, "blocked", failed.Error["kind"])
	assert.Empty(t, c.tg.Sent(eve.ID))
}

// A label added over the API starts its label_added reaction, as a label a run adds does:
// the subscriber (created by an inbound /start) gets the reaction's message once, and a
// retried request (the label is there already) starts nothing. Labels given when a
// subscriber is created over the API start it too.
func TestConversationLabelAddedOverTheAPI(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s := c.s
	tok, bot := s.demo.Token, s.demo.BotID
	r := s.post(tok, "/api/bots/"+bot+"/labels", map[string]any{"name": "vip"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	label := r.JSON(t)["id"].(string)
	vip := c.publish(t, fmt.Sprintf(`{"name":"VIP","trigger":{"type":"label_added","label_id":%q},"steps":[
		{"id":"hi","type":"send_text","text":"Welcome to the VIP club"}]}`, label))
	c.publish(t, `{"name":"Ping","trigger":{"type":"keyword","keywords":["ping"]},"steps":[{"id":"p","type":"send_text","text":"pong"}]}`)

	ann := fake.User{ID: 5201, FirstName: "Ann"}
	c.deliver(t, c.tg.TextUpdate(ann, "/start")) // no start reaction: only the subscriber
	var sub string
	eventually(t, 10*time.Second, "ann's subscriber", func() bool {
		r := s.get(tok, "/api/bots/"+bot+"/subscribers?channel=telegram&external_id=5201")
		list, _ := r.JSON(t)["data"].([]any)
		if len(list) == 1 {
			sub = list[0].(map[string]any)["id"].(string)
		}
		return sub != ""
	})
	assert.Empty(t, c.tg.Sent(ann.ID))

	path := "/api/bots/" + bot + "/subscribers/" + sub + "/labels"
	r = s.post(tok, path, map[string]any{"label_id": label})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	eventually(t, 10*time.Second, "the label_added reaction's message", func() bool { return len(c.tg.Sent(ann.ID)) >= 1 })
	r = s.post(tok, path, map[string]any{"label_id": label}) // a client's retry
	require.Equal(t, 200, r.Status, "%s", r.Body)
	// A ping answered afterwards shows the queue has moved past anything the retry sent.
	c.deliver(t, c.tg.TextUpdate(ann, "ping"))
	eventually(t, 10*time.Second, "the pong", func() bool { return len(c.tg.Sent(ann.ID)) >= 2 })
	assert.Equal(t, []string{"Welcome to the VIP club", "pong"}, texts(c.tg, ann.ID), "once")

	var runs []trace
	eventually(t, 10*time.Second, "two runs", func() bool { runs = c.executions(t, sub); return len(runs) == 2 })
	run := c.execution(t, runs[1].ID)
	assert.Equal(t, vip, run.ReactionID)
	assert.Equal(t, map[string]any{"type": "label_added", "reason": "api", "label_id": label}, run.Trigger)
	assert.Equal(t, "completed", run.Status)

	// A subscriber created over the API with the label: its reaction runs for them too.
	r = s.post(tok, "/api/bots/"+bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": "5202", "labels": []string{label}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	eventually(t, 10*time.Second, "the new subscriber's message", func() bool { return len(c.tg.Sent(5202)) >= 1 })
	assert.Equal(t, []string{"Welcome to the VIP club"}, texts(c.tg, 5202))
}

// A quick_replies buttons step reaches Telegram as a one-time reply keyboard; the tapped
// reply arrives as a text message with the button's title, which resumes the run.
func TestConversationQuickReplies(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	c.publish(t, `{"name":"Menu","trigger":{"type":"keyword","keywords":["menu"]},"steps":[
		{"id":"ask","type":"buttons","style":"quick_replies","text":"Shall we?","buttons":[{"title":"Yes","step_id":"yes"},{"title":"No","step_id":"no"}]},
		{"id":"yes","type":"send_text","text":"You said yes"},
		{"id":"end","type":"end"},
		{"id":"no","type":"send_text","text":"You said no"}]}`)
	bob := fake.User{ID: 6201, FirstName: "Bob"}
	c.deliver(t, c.tg.TextUpdate(bob, "menu"))
	eventually(t, 10*time.Second, "the menu", func() bool { return len(c.tg.Sent(bob.ID)) >= 1 })
	menu := c.tg.Sent(bob.ID)[0]
	assert.Nil(t, menu.Buttons, "no inline keyboard")
	require.NotNil(t, menu.Keyboard)
	assert.Equal(t, fake.ReplyKeyboard{Buttons: [][]string{{"Yes"}, {"No"}}, OneTimeKeyboard: true, ResizeKeyboard: true}, *menu.Keyboard)
	sub := c.subscriber(t, bob)
	eventually(t, 10*time.Second, "the run waits for a reply", func() bool {
		r := c.executions(t, sub)
		return len(r) == 1 && r[0].Status == "waiting"
	})

	c.deliver(t, c.tg.TextUpdate(bob, "No")) // what Telegram sends when Bob taps "No"
	eventually(t, 10*time.Second, "the answer", func() bool { return len(c.tg.Sent(bob.ID)) >= 2 })
	assert.Equal(t, []string{"Shall we?", "You said no"}, texts(c.tg, bob.ID))
	eventually(t, 10*time.Second, "the run completes", func() bool { return c.executions(t, sub)[0].Status == "completed" })
	run := c.execution(t, c.executions(t, sub)[0].ID)
	require.GreaterOrEqual(t, len(run.Steps), 2)
	assert.Equal(t, true, run.Steps[1].Decision["quick_reply"])
}
