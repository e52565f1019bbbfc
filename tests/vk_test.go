package tests

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakevk "github.com/botplatform/api/tests/fakes/vk"
)

// vkCreds is a connect request for a VK community.
func vkCreds(token string, group any) map[string]any {
	return map[string]any{"type": "vk", "credentials": map[string]any{"access_token": token, "group_id": group}}
}

// TestVKConnect connects a VK community over REST to a process that has a public URL: the
// credentials are checked with VK (the fake), a callback server is registered for the
// channel's webhook, and disconnecting removes it again.
func TestVKConnect(t *testing.T) {
	t.Parallel()
	vk := fakevk.New(t)
	const public = "https://bots.example.com"
	s := startWith(t, t.TempDir(), "--vk-base-url", vk.BaseURL(), "--public-url", public)
	s.secret(fakevk.Token) // a provider credential: it must never reach a response or the log
	tok, bot := s.demo.Token, s.demo.BotID
	path := "/api/bots/" + bot + "/channels"

	t.Run("capabilities", func(t *testing.T) {
		r := s.get(tok, "/api/channels/capabilities")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var vkCaps map[string]any
		for _, c := range r.JSON(t)["data"].([]any) {
			if c.(map[string]any)["type"] == "vk" {
				vkCaps = c.(map[string]any)
			}
		}
		require.NotNil(t, vkCaps, "vk in %s", r.Body)
		assert.Equal(t, true, vkCaps["connectable_over_rest"])
		assert.EqualValues(t, 4096, vkCaps["max_text_length"])
		assert.EqualValues(t, 10, vkCaps["buttons"].(map[string]any)["max"])
	})

	t.Run("400", func(t *testing.T) {
		for name, tc := range map[string]struct {
			body  any
			code  string
			field string
		}{
			"no group":         {vkCreds(fakevk.Token, nil), "validation_failed", "credentials.group_id"},
			"group as string":  {vkCreds(fakevk.Token, "229000111"), "invalid_body", "credentials.group_id"},
			"no key":           {vkCreds("", fakevk.GroupID), "validation_failed", "credentials.access_token"},
			"another group":    {vkCreds(fakevk.Token, 42), "validation_failed", "credentials.group_id"},
			"unknown member":   {map[string]any{"type": "vk", "credentials": map[string]any{"access_token": fakevk.Token, "group_id": fakevk.GroupID, "secret": "x"}}, "unknown_field", "credentials.secret"},
			"credentials null": {map[string]any{"type": "vk", "credentials": nil}, "validation_failed", "credentials"},
		} {
			r := s.post(tok, path, tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r.Body)
			assert.Equal(t, tc.code, r.Code(t), name)
			m := r.JSON(t)
			if errs, ok := m["errors"].([]any); ok {
				assert.Equal(t, tc.field, errs[0].(map[string]any)["field"], name)
			} else {
				assert.Equal(t, tc.field, m["field"], name)
			}
		}
	})

	t.Run("422 and 503", func(t *testing.T) {
		for name, token := range map[string]string{"unknown key": "vk1.a.not-a-key", "a user's key": fakevk.UserToken} {
			r := s.post(tok, path, vkCreds(token, fakevk.GroupID))
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", name, r.Body)
			assert.Equal(t, "credentials_rejected", r.Code(t), name)
			assert.NotContains(t, string(r.Body), token)
		}
		vk.Unavailable(1)
		r := s.post(tok, path, vkCreds(fakevk.Token, fakevk.GroupID))
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		assert.Equal(t, "provider_unavailable", r.Code(t))
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		assert.Empty(t, vk.CallbackServers(fakevk.GroupID), "nothing registered by a refused connect")
		assert.Empty(t, s.get(tok, path).JSON(t)["data"])
	})

	var id string
	t.Run("201", func(t *testing.T) {
		r := s.post(tok, path, vkCreds(fakevk.Token, fakevk.GroupID))
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		m := r.JSON(t)
		id = m["id"].(string)
		assert.True(t, strings.HasPrefix(id, "ch_"), id)
		assert.Equal(t, "vk", m["type"])
		assert.Equal(t, fakevk.GroupName, m["name"], "named after the community")
		assert.Equal(t, map[string]any{"group_id": float64(fakevk.GroupID), "name": fakevk.GroupName, "screen_name": fakevk.GroupScreenName}, m["settings"])
		assert.Equal(t, public+"/webhooks/vk/"+id, m["webhook_url"])
		assert.Equal(t, "/api/bots/"+bot+"/channels/"+id, r.Header.Get("Location"))
		assert.NotContains(t, string(r.Body), fakevk.ConfirmationCode)

		servers := vk.CallbackServers(fakevk.GroupID)
		require.Len(t, servers, 1)
		assert.Equal(t, public+"/webhooks/vk/"+id, servers[0].URL)
		assert.Regexp(t, `^[0-9a-f]{50}$`, servers[0].SecretKey)
		assert.Equal(t, map[string]string{"api_version": "5.199", "message_new": "1", "message_event": "1"}, servers[0].Settings)

		list := s.get(tok, path).JSON(t)["data"].([]any)
		require.Len(t, list, 1)
		assert.Equal(t, id, list[0].(map[string]any)["id"])
		assert.NotContains(t, string(s.get(tok, path).Body), fakevk.Token)
	})

	t.Run("409", func(t *testing.T) {
		r := s.post(tok, path, vkCreds(fakevk.Token, fakevk.GroupID))
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		assert.Equal(t, "channel_exists", r.Code(t))
		other := s.newAccount("other")
		r = s.post(other.Token, "/api/bots/"+other.Bot+"/channels", vkCreds(fakevk.Token, fakevk.GroupID))
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		assert.Equal(t, "channel_in_use", r.Code(t), "a community serves one bot")
		assert.Len(t, vk.CallbackServers(fakevk.GroupID), 1, "the refused connects' callback servers were removed again")
	})

	t.Run("204", func(t *testing.T) {
		r := s.del(tok, path+"/"+id)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
		assert.Empty(t, vk.CallbackServers(fakevk.GroupID), "disconnect removes the callback server")
		assert.Empty(t, s.get(tok, path).JSON(t)["data"])
		assert.Equal(t, http.StatusNotFound, s.del(tok, path+"/"+id).Status)
		// The community can be connected again, to any bot.
		r = s.post(tok, path, vkCreds(fakevk.Token, fakevk.GroupID))
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	})
}

// TestVKConnectWithoutPublicURL: a process nobody can reach (a laptop) checks the
// credentials but registers no callback server.
func TestVKConnectWithoutPublicURL(t *testing.T) {
	t.Parallel()
	vk := fakevk.New(t)
	s := startWith(t, t.TempDir(), "--vk-base-url", vk.BaseURL(), "--public-url", "")
	s.secret(fakevk.Token)
	r := s.post(s.demo.Token, "/api/bots/"+s.demo.BotID+"/channels", vkCreds(fakevk.Token, fakevk.GroupID))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Nil(t, r.JSON(t)["webhook_url"])
	assert.Empty(t, vk.CallbackServers(fakevk.GroupID))
	assert.Len(t, vk.CallsOf("groups.getCallbackConfirmationCode"), 1)
}

// TestVKConversation: a VK community connected over REST to a process VK can reach. VK (the
// fake) confirms the callback server, which the webhook answers with the community's code;
// a user presses the community's Start button and a published start reaction answers with
// text and an inline keyboard; pressing a keyboard button runs the reaction of its payload.
// A delivery with a forged secret key is refused.
func TestVKConversation(t *testing.T) {
	t.Parallel()
	vk := fakevk.New(t)
	port := freePort(t)
	s := startWith(t, t.TempDir(), "--addr", "127.0.0.1:"+port, "--public-url", "http://127.0.0.1:"+port, "--vk-base-url", vk.BaseURL())
	s.secret(fakevk.Token)
	tok, bot := s.demo.Token, s.demo.BotID
	r := s.post(tok, "/api/bots/"+bot+"/channels", vkCreds(fakevk.Token, fakevk.GroupID))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	webhook := r.JSON(t)["webhook_url"].(string)

	servers := vk.CallbackServers(fakevk.GroupID)
	require.Len(t, servers, 1)
	ans, err := vk.Confirm(fakevk.GroupID, servers[0].ID)
	require.NoError(t, err)
	assert.Equal(t, fakevk.Answer{Status: http.StatusOK, Body: fakevk.ConfirmationCode}, ans)
	assert.Equal(t, "ok", vk.CallbackServers(fakevk.GroupID)[0].Status, "VK confirmed the address")

	publish := func(reaction map[string]any) {
		r := s.post(tok, "/api/bots/"+bot+"/reactions", reaction)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		id := r.JSON(t)["id"].(string)
		r = s.post(tok, "/api/bots/"+bot+"/reactions/"+id+"/publish", map[string]any{"expected_revision": 1})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	publish(map[string]any{"name": "Welcome", "trigger": map[string]any{"type": "start"}, "steps": []any{
		map[string]any{"id": "hi", "type": "send_text", "text": "Привет!"},
		map[string]any{"id": "menu", "type": "buttons", "text": "What would you like?", "buttons": []any{
			map[string]any{"title": "Coffee", "payload": "coffee"},
			map[string]any{"title": "Our site", "url": "https://example.com"},
		}},
	}})
	publish(map[string]any{"name": "Coffee", "trigger": map[string]any{"type": "button", "payload": "coffee"},
		"steps": []any{map[string]any{"id": "c", "type": "send_text", "text": "One coffee coming"}}})

	const user = 777001
	sent := func() []fakevk.Message {
		var out []fakevk.Message
		for _, m := range vk.Messages() {
			if m.PeerID == user {
				out = append(out, m)
			}
		}
		return out
	}
	answers, err := vk.Deliver(fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: user, ID: 1, Text: "Начать", Payload: `{"command":"start"}`}))
	require.NoError(t, err)
	require.Equal(t, []fakevk.Answer{{Status: http.StatusOK, Body: "ok"}}, answers)
	eventually(t, 10*time.Second, "the welcome messages", func() bool { return len(sent()) >= 2 })
	msgs := sent()
	assert.Equal(t, "Привет!", msgs[0].Text)
	assert.Equal(t, "What would you like?", msgs[1].Text)
	var kb struct {
		Inline  bool `json:"inline"`
		Buttons [][]struct {
			Action map[string]string `json:"action"`
		} `json:"buttons"`
	}
	require.NoError(t, json.Unmarshal(msgs[1].Keyboard, &kb))
	assert.True(t, kb.Inline)
	require.Len(t, kb.Buttons, 2)
	assert.Equal(t, `{"p":"coffee"}`, kb.Buttons[0][0].Action["payload"])
	assert.Equal(t, "open_link", kb.Buttons[1][0].Action["type"])

	_, err = vk.Deliver(fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: user, ID: 3, Text: "Coffee", Payload: kb.Buttons[0][0].Action["payload"]}))
	require.NoError(t, err)
	eventually(t, 10*time.Second, "the button's reaction", func() bool { return len(sent()) >= 3 })
	assert.Equal(t, "One coffee coming", sent()[2].Text)

	r = s.get(tok, "/api/bots/"+bot+"/subscribers?channel=vk&external_id="+strconv.Itoa(user))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	subs := r.JSON(t)["data"].([]any)
	require.Len(t, subs, 1)
	assert.Equal(t, "ru", subs[0].(map[string]any)["locale"], "from client_info.lang_id")

	forged, err := fakevk.Post(webhook, "0123456789abcdef", fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: user, ID: 4, Text: "x"}), 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, forged.Status)
	confirmForged, err := fakevk.Post(webhook, "", fakevk.Confirmation(fakevk.GroupID), 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, confirmForged.Status)
	assert.NotContains(t, confirmForged.Body, fakevk.ConfirmationCode, "a forged confirmation learns no code")
}

// A send whose answer VK lost (VK sent the message; the connection broke before its answer)
// is retried with the same random_id, derived from the step's idempotency key: the user gets
// the message once, and the run goes on.
func TestVKSendRetriedAfterLostAnswerIsDeliveredOnce(t *testing.T) {
	t.Parallel()
	vk := fakevk.New(t)
	port := freePort(t)
	s := startWith(t, t.TempDir(), "--addr", "127.0.0.1:"+port, "--public-url", "http://127.0.0.1:"+port, "--vk-base-url", vk.BaseURL())
	s.secret(fakevk.Token)
	tok, bot := s.demo.Token, s.demo.BotID
	r := s.post(tok, "/api/bots/"+bot+"/channels", vkCreds(fakevk.Token, fakevk.GroupID))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	servers := vk.CallbackServers(fakevk.GroupID)
	require.Len(t, servers, 1)
	_, err := vk.Confirm(fakevk.GroupID, servers[0].ID)
	require.NoError(t, err)
	r = s.post(tok, "/api/bots/"+bot+"/reactions", map[string]any{"name": "Welcome", "trigger": map[string]any{"type": "start"}, "steps": []any{
		map[string]any{"id": "hi", "type": "send_text", "text": "Привет!"},
		map[string]any{"id": "menu", "type": "buttons", "style": "quick_replies", "text": "Кофе?", "buttons": []any{
			map[string]any{"title": "Да", "payload": "coffee"},
		}},
	}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := r.JSON(t)["id"].(string)
	r = s.post(tok, "/api/bots/"+bot+"/reactions/"+id+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	const user = 777002
	vk.LoseAnswers("messages.send", 1)
	_, err = vk.Deliver(fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: user, ID: 1, Text: "Начать", Payload: `{"command":"start"}`}))
	require.NoError(t, err)
	eventually(t, 20*time.Second, "both messages", func() bool { return len(vk.Messages()) >= 2 })
	calls := vk.CallsOf("messages.send")
	require.Len(t, calls, 3, "the first send was retried")
	assert.Equal(t, calls[0].Params.Get("random_id"), calls[1].Params.Get("random_id"), "the retry is the same message")
	assert.NotEqual(t, calls[1].Params.Get("random_id"), calls[2].Params.Get("random_id"))
	msgs := vk.Messages()
	require.Len(t, msgs, 2, "delivered once")
	assert.Equal(t, "Привет!", msgs[0].Text)

	// The quick replies went out as a one-time keyboard under the input field.
	var kb struct {
		OneTime bool `json:"one_time"`
		Inline  bool `json:"inline"`
	}
	require.NoError(t, json.Unmarshal(msgs[1].Keyboard, &kb))
	assert.True(t, kb.OneTime)
	assert.False(t, kb.Inline)

	r = s.get(tok, "/api/bots/"+bot+"/subscribers?channel=vk&external_id="+strconv.Itoa(user))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	sub := r.JSON(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	var runs []trace
	eventually(t, 10*time.Second, "the run waits for a reply", func() bool {
		r := s.get(tok, "/api/bots/"+bot+"/subscribers/"+sub+"/executions")
		var list struct {
			Data []trace `json:"data"`
		}
		_ = json.Unmarshal(r.Body, &list)
		runs = list.Data
		return len(runs) == 1 && runs[0].Status == "waiting"
	})
	r = s.get(tok, "/api/bots/"+bot+"/executions/"+runs[0].ID)
	var run trace
	require.NoError(t, json.Unmarshal(r.Body, &run))
	require.Len(t, run.Steps, 2)
	assert.Equal(t, 2, run.Steps[0].Attempts)
	assert.Equal(t, strconv.FormatInt(msgs[0].ID, 10), run.Steps[0].Outcome["message_id"], "the first message's id")
}
