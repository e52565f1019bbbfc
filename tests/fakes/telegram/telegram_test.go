package telegram

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
}

func call(t *testing.T, s *Server, token, method, body string) (int, answer) {
	t.Helper()
	res, err := http.Post(s.URL+"/bot"+token+"/"+method, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer res.Body.Close()
	var a answer
	require.NoError(t, json.NewDecoder(res.Body).Decode(&a))
	return res.StatusCode, a
}

// The fake refuses what the Bot API refuses, with its status and description.
func TestChecks(t *testing.T) {
	t.Parallel()
	s := New(t)
	b := s.AddBot("x_bot")
	row := func(n int) string {
		bs := make([]string, n)
		for i := range bs {
			bs[i] = `{"text":"b","callback_data":"p"}`
		}
		return "[" + strings.Join(bs, ",") + "]"
	}
	rows := func(n int) string {
		rs := make([]string, n)
		for i := range rs {
			rs[i] = row(1)
		}
		return strings.Join(rs, ",")
	}
	for _, tc := range []struct {
		token, method, body string
		status              int
		desc                string
	}{
		{"not-a-token", "getMe", `{}`, 404, "Not Found"},
		{"123:" + strings.Repeat("A", 35), "getMe", `{}`, 401, "Unauthorized"},
		{b.Token, "sendSticker", `{}`, 404, "Not Found: method not found"},
		{b.Token, "sendMessage", `{"text":"x"}`, 400, "Bad Request: chat_id is empty"},
		{b.Token, "sendMessage", `{"chat_id":"@nobody","text":"x"}`, 400, "Bad Request: chat not found"},
		{b.Token, "sendMessage", `{"chat_id":1}`, 400, "Bad Request: message text is empty"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"` + strings.Repeat("a", 4097) + `"}`, 400, "Bad Request: message is too long"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","parse_mode":"BBCode"}`, 400, "Bad Request: unsupported parse_mode"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"inline_keyboard":[` + row(9) + `]}}`, 400, "Bad Request: too many buttons in a row"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"inline_keyboard":[` + rows(101) + `]}}`, 400, "Bad Request: reply markup is too long"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"inline_keyboard":[[{"text":"b","callback_data":"` + strings.Repeat("d", 65) + `"}]]}}`, 400, "Bad Request: BUTTON_DATA_INVALID"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"inline_keyboard":[[{"text":"b"}]]}}`, 400, "Bad Request: text buttons are unallowed in the inline keyboard"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"keyboard":[]}}`, 400, `Bad Request: field "keyboard" of the ReplyKeyboardMarkup should be non-empty`},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"keyboard":[[{"text":" "}]]}}`, 400, "Bad Request: BUTTON_TEXT_INVALID"},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"keyboard":[[{"label":"b"}]]}}`, 400, ""},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"keyboard":[[{"text":"b","callback_data":"p"}]]}}`, 400, ""},
		{b.Token, "sendMessage", `{"chat_id":1,"text":"x","reply_markup":{"keyboard":[[{"text":"b"}]],"input_field_placeholder":"` + strings.Repeat("p", 65) + `"}}`, 400, "Bad Request: input field placeholder is too long"},
		{b.Token, "sendPhoto", `{"chat_id":1}`, 400, "Bad Request: there is no photo in the request"},
		{b.Token, "sendPhoto", `{"chat_id":1,"photo":"https://e.com/a.png","caption":"` + strings.Repeat("c", 1025) + `"}`, 400, "Bad Request: message caption is too long"},
		{b.Token, "setWebhook", `{"url":"https://e.com/h","secret_token":"has space"}`, 400, "Bad Request: secret token contains unallowed characters"},
		{b.Token, "setWebhook", `{"url":"https://e.com/h","allowed_updates":["messages"]}`, 400, ""},
		{b.Token, "answerCallbackQuery", `{"callback_query_id":"123"}`, 400, "Bad Request: query is too old and response timeout expired or query ID is invalid"},
	} {
		status, a := call(t, s, tc.token, tc.method, tc.body)
		assert.Equal(t, tc.status, status, "%s %s", tc.method, tc.body[:min(len(tc.body), 60)])
		assert.False(t, a.OK)
		assert.Equal(t, tc.status, a.ErrorCode)
		if tc.desc != "" {
			assert.Equal(t, tc.desc, a.Description)
		}
	}
	assert.Empty(t, s.AllSent())
}

// A reply keyboard (ReplyKeyboardMarkup) is recorded with its options; its buttons may be
// objects or plain strings.
func TestReplyKeyboard(t *testing.T) {
	t.Parallel()
	s := New(t)
	b := s.AddBot("kb_bot")
	status, a := call(t, s, b.Token, "sendMessage", `{"chat_id":3,"text":"Pick","reply_markup":{"keyboard":[[{"text":"Yes"},"No"]],"one_time_keyboard":true,"resize_keyboard":true}}`)
	require.Equal(t, 200, status, a.Description)
	sent := s.Sent(3)
	require.Len(t, sent, 1)
	assert.Nil(t, sent[0].Buttons)
	assert.Equal(t, &ReplyKeyboard{Buttons: [][]string{{"Yes", "No"}}, OneTimeKeyboard: true, ResizeKeyboard: true}, sent[0].Keyboard)
	assert.NotContains(t, string(a.Result), "reply_markup", "Telegram echoes inline keyboards only")
}

func TestFormParametersAndStrictWebhook(t *testing.T) {
	t.Parallel()
	s := New(t)
	b := s.AddBot("form_bot")
	form := url.Values{"chat_id": {"5"}, "text": {"hi"}, "reply_markup": {`{"inline_keyboard":[[{"text":"Go","url":"https://e.com"}]]}`}}
	res, err := http.PostForm(s.URL+"/bot"+b.Token+"/sendMessage", form)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	sent := s.Sent(5)
	require.Len(t, sent, 1)
	assert.Equal(t, [][]Button{{{Text: "Go", URL: "https://e.com"}}}, sent[0].Buttons)

	s.RequireHTTPS(true)
	status, a := call(t, s, b.Token, "setWebhook", `{"url":"https://e.com:9000/h"}`)
	assert.Equal(t, 400, status)
	assert.Contains(t, a.Description, "ports 80, 88, 443 or 8443")
	status, _ = call(t, s, b.Token, "setWebhook", `{"url":"https://e.com:8443/h","allowed_updates":"[\"message\"]"}`)
	assert.Equal(t, 200, status)
	w, _ := s.Webhook(b)
	assert.Equal(t, []string{"message"}, w.AllowedUpdates)
	status, _ = call(t, s, b.Token, "setWebhook", `{"url":""}`)
	assert.Equal(t, 200, status)
	_, ok := s.Webhook(b)
	assert.False(t, ok)
}

func TestDeliver(t *testing.T) {
	t.Parallel()
	s := New(t)
	b := s.AddBot("hook_bot")
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("X-Telegram-Bot-Api-Secret-Token")+" "+r.Header.Get("Content-Type")+" "+string(body))
		mu.Unlock()
	}))
	defer hook.Close()
	_, err := s.Deliver(b, []byte(`{}`))
	require.Error(t, err, "no webhook yet")
	status, _ := call(t, s, b.Token, "setWebhook", `{"url":"`+hook.URL+`/h","secret_token":"sek_ret"}`)
	require.Equal(t, 200, status)
	update := s.TextUpdate(User{ID: 9, FirstName: "Al"}, "/start")
	code, err := s.Deliver(b, update)
	require.NoError(t, err)
	assert.Equal(t, 200, code)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	assert.Equal(t, "sek_ret application/json "+string(update), got[0])
	var u map[string]any
	require.NoError(t, json.Unmarshal(update, &u))
	assert.Equal(t, "/start", u["message"].(map[string]any)["text"])
}
