package httpapitest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestServer(t *testing.T) {
	t.Parallel()
	s := httpapitest.New(t, httpapitest.Config{Now: httpapitest.NewClock(t0, 0).Now, BotIDs: []string{"bot_a"}})
	s.Mux.Handle("GET /api/bots/{botID}/echo", httpapi.Need("bots:read", auth.RightReactions), func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.WriteJSON(w, http.StatusOK, map[string]any{"bot": r.PathValue("botID"), "user": httpapi.Caller(r).UserID})
	})
	s.Mux.Handle("POST /api/text", httpapi.Need("bots:write"), func(w http.ResponseWriter, r *http.Request) error {
		var in struct{ Name string }
		if err := httpapi.Decode(w, r, &in); err != nil {
			return err
		}
		_, err := w.Write([]byte("hello " + in.Name))
		return err
	})

	res := s.Do(t, "GET", "/api/bots/bot_a/echo", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, map[string]any{"bot": "bot_a", "user": s.Owner.ID}, res.JSON)
	assert.Empty(t, res.Problem())

	res = s.Do(t, "GET", "/api/bots/bot_b/echo", nil)
	assert.Equal(t, http.StatusNotFound, res.Code, "a bot the account does not have")
	assert.Equal(t, "not_found", res.Problem())
	res = s.DoAs(t, "", "GET", "/api/bots/bot_a/echo", nil)
	assert.Equal(t, "missing_credentials", res.Problem())
	res = s.DoAs(t, s.PAT(t, s.Owner, "bots:write"), "GET", "/api/bots/bot_a/echo", nil)
	assert.Equal(t, "insufficient_scope", res.Problem())
	assert.Equal(t, http.StatusOK, s.DoAs(t, s.BotToken(t, "bot_a"), "GET", "/api/bots/bot_a/echo", nil).Code)

	member, err := s.Auth.CreateUser(t.Context(), s.Account.ID, "M", 0)
	require.NoError(t, err)
	res = s.DoAs(t, s.PAT(t, member), "GET", "/api/bots/bot_a/echo", nil)
	assert.Equal(t, "missing_right", res.Problem())

	// A string body goes as JSON; a []byte body with the Content-Type of the header pairs.
	res = s.Do(t, "POST", "/api/text", `{"Name":"Ann"}`)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "hello Ann", res.Body)
	assert.Nil(t, res.JSON, "no JSON reply")
	res = s.Do(t, "POST", "/api/text", []byte(`{"Name":"Ann"}`), "Content-Type", "text/plain")
	assert.Equal(t, "unsupported_media_type", res.Problem())
	res = s.Do(t, "POST", "/api/text", map[string]string{"Name": "Bob"})
	assert.Equal(t, "hello Bob", res.Body)
}

func TestClock(t *testing.T) {
	t.Parallel()
	still := httpapitest.NewClock(t0, 0)
	assert.Equal(t, t0, still.Now())
	assert.Equal(t, t0, still.Now())
	still.Advance(time.Hour)
	assert.Equal(t, t0.Add(time.Hour), still.Now())

	ticking := httpapitest.NewClock(t0, time.Second)
	assert.Equal(t, t0.Add(time.Second), ticking.Now())
	assert.Equal(t, t0.Add(2*time.Second), ticking.Now())
}
