package vk

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// call posts a form to the fake and returns the decoded answer.
func call(t *testing.T, s *Server, method string, form url.Values) map[string]any {
	t.Helper()
	res, err := http.PostForm(s.BaseURL()+"/"+method, form)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, "VK answers its errors with 200")
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return m
}

func errorCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0
	}
	return int(e["error_code"].(float64))
}

func TestFakeChecksRequests(t *testing.T) {
	t.Parallel()
	s := New(t)
	base := url.Values{"access_token": {Token}, "v": {"5.199"}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range base {
			v[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				v.Del(kv[i])
			} else {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v
	}
	assert.Equal(t, ErrInvalidRequest, errorCode(call(t, s, "groups.getById", with("v", ""))))
	assert.Equal(t, ErrInvalidRequest, errorCode(call(t, s, "groups.getById", with("v", "3.0"))))
	assert.Equal(t, ErrAuth, errorCode(call(t, s, "groups.getById", with("access_token", ""))))
	assert.Equal(t, ErrAuth, errorCode(call(t, s, "groups.getById", with("access_token", "bogus"))))
	assert.Equal(t, ErrUnknownMethod, errorCode(call(t, s, "groups.nope", with())))
	assert.Equal(t, ErrParam, errorCode(call(t, s, "groups.getById", with("access_token", UserToken))))
	assert.Equal(t, ErrParam, errorCode(call(t, s, "messages.send", with("peer_id", "1", "message", "x"))), "random_id is required")
	assert.Equal(t, ErrParam, errorCode(call(t, s, "messages.send", with("peer_id", "1", "random_id", "1"))), "message or attachment")
	assert.Equal(t, ErrTooLong, errorCode(call(t, s, "messages.send", with("peer_id", "1", "random_id", "1", "message", strings.Repeat("x", 4097)))))
	assert.Equal(t, ErrKeyboard, errorCode(call(t, s, "messages.send", with("peer_id", "1", "random_id", "1", "message", "x",
		"keyboard", `{"inline":true,"buttons":[[{"action":{"type":"text","label":"`+strings.Repeat("x", 41)+`"}}]]}`))))
	assert.Equal(t, ErrParam, errorCode(call(t, s, "messages.send", with("peer_id", "1", "random_id", "1", "attachment", "photo-1_2"))))
	assert.Equal(t, ErrParam, errorCode(call(t, s, "groups.addCallbackServer", with("group_id", "229000111", "url", "https://x.example/h", "title", "botplatform", "secret_key", "has-dash"))))
	assert.Equal(t, ErrParam, errorCode(call(t, s, "groups.addCallbackServer", with("group_id", "229000111", "url", "https://x.example/h", "title", "a title too long"))))
	assert.Equal(t, ErrAccessDenied, errorCode(call(t, s, "groups.getCallbackConfirmationCode", with("group_id", "1"))))

	// The error echoes the parameters but never the access token.
	m := call(t, s, "messages.send", with("peer_id", "1", "message", "x"))
	b, _ := json.Marshal(m)
	assert.Contains(t, string(b), `"request_params"`)
	assert.NotContains(t, string(b), Token)
	for _, c := range s.Calls() {
		assert.Empty(t, c.Params.Get("access_token"))
	}

	// Query parameters work as form ones do.
	res, err := http.Get(s.BaseURL() + "/groups.getById?" + base.Encode())
	require.NoError(t, err)
	defer res.Body.Close()
	var got struct {
		Response struct {
			Groups []struct {
				ID int64 `json:"id"`
			} `json:"groups"`
		} `json:"response"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&got))
	require.Len(t, got.Response.Groups, 1)
	assert.Equal(t, GroupID, got.Response.Groups[0].ID)
}

func TestFakeDeduplicatesRandomID(t *testing.T) {
	t.Parallel()
	s := New(t)
	form := url.Values{"access_token": {Token}, "v": {"5.199"}, "peer_id": {"7"}, "random_id": {"42"}, "message": {"once"}}
	first := call(t, s, "messages.send", form)
	again := call(t, s, "messages.send", form)
	assert.Equal(t, first["response"], again["response"], "the first message's id")
	assert.Len(t, s.Messages(), 1, "delivered once")
	form.Set("peer_id", "8")
	call(t, s, "messages.send", form)
	assert.Len(t, s.Messages(), 2, "random_id is per peer")
}

// A lost answer: the call takes effect, the client gets no response; a retry with the same
// random_id is the same message.
func TestFakeLosesAnswers(t *testing.T) {
	t.Parallel()
	s := New(t)
	form := url.Values{"access_token": {Token}, "v": {"5.199"}, "peer_id": {"7"}, "random_id": {"42"}, "message": {"once"}}
	s.LoseAnswers("messages.send", 1)
	_, err := http.PostForm(s.BaseURL()+"/messages.send", form)
	require.Error(t, err, "no answer")
	require.Len(t, s.Messages(), 1)
	m := call(t, s, "messages.send", form)
	assert.EqualValues(t, s.Messages()[0].ID, m["response"])
	assert.Len(t, s.Messages(), 1)
}

// Keyboards follow VK's rules: an inline keyboard has at most 6 rows and cannot be one-time;
// a keyboard under the input field has up to 10 rows.
func TestFakeKeyboards(t *testing.T) {
	t.Parallel()
	s := New(t)
	rows := func(n int) string {
		r := make([]string, n)
		for i := range r {
			r[i] = `[{"action":{"type":"text","label":"b","payload":"{\"p\":\"x\"}"}}]`
		}
		return "[" + strings.Join(r, ",") + "]"
	}
	send := func(kb string) map[string]any {
		return call(t, s, "messages.send", url.Values{"access_token": {Token}, "v": {"5.199"}, "peer_id": {"7"},
			"random_id": {"0"}, "message": {"x"}, "keyboard": {kb}})
	}
	assert.Zero(t, errorCode(send(`{"one_time":true,"inline":false,"buttons":`+rows(10)+`}`)))
	assert.Equal(t, ErrKeyboard, errorCode(send(`{"one_time":true,"inline":false,"buttons":`+rows(11)+`}`)))
	assert.Equal(t, ErrKeyboard, errorCode(send(`{"inline":true,"buttons":`+rows(7)+`}`)))
	assert.Equal(t, ErrKeyboard, errorCode(send(`{"one_time":true,"inline":true,"buttons":`+rows(1)+`}`)))
}

func TestFakeServersLimit(t *testing.T) {
	t.Parallel()
	s := New(t)
	form := url.Values{"access_token": {Token}, "v": {"5.199"}, "group_id": {"229000111"}, "url": {"https://x.example/h"}, "title": {"t"}}
	for range 10 {
		require.Zero(t, errorCode(call(t, s, "groups.addCallbackServer", form)))
	}
	assert.Equal(t, ErrServersLimit, errorCode(call(t, s, "groups.addCallbackServer", form)))
}
