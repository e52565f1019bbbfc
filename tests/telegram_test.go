package tests

import (
	"encoding/json"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/families"
	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// freePort returns a port free on 127.0.0.1 a moment ago, for a server that must know its
// own address before it starts (its public URL).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// channelsServed tells whether this build serves the channel routes yet.
func channelsServed() bool {
	_, err := families.Named("channels")
	return err == nil
}

// An operator attaches a Telegram bot with the admin CLI while serve runs: the token is
// checked with getMe, the webhook is registered at serve's public URL with a fresh secret,
// and the channel is listed without any credential.
func TestTelegramAdminConnect(t *testing.T) {
	t.Parallel()
	tg := fake.New(t)
	shop := tg.AddBot("shop_bot")
	port := freePort(t)
	public := "http://127.0.0.1:" + port
	s := startWith(t, t.TempDir(), "--addr", "127.0.0.1:"+port, "--public-url", public, "--telegram-base-url", tg.URL)
	require.Equal(t, public, s.base)
	// The Telegram token is a secret: it must never reach a log line or a response.
	s.secret(shop.Token)

	out := s.admin("channel", "connect", "--bot", s.demo.BotID, "--type", "telegram", "--token", shop.Token, "--base-url", tg.URL)
	id := out["channel_id"]
	require.True(t, strings.HasPrefix(id, "ch_"), "channel_id %q", id)
	assert.Equal(t, public+"/webhooks/telegram/"+id, out["webhook_url"])
	assert.Equal(t, "@shop_bot", out["name"])

	w, ok := tg.Webhook(shop)
	require.True(t, ok, "setWebhook was called")
	assert.Equal(t, out["webhook_url"], w.URL)
	assert.GreaterOrEqual(t, len(w.SecretToken), 32, "a random secret token")
	assert.Equal(t, []string{"message", "callback_query"}, w.AllowedUpdates)
	assert.False(t, w.DropPendingUpdates)

	if !channelsServed() {
		t.Log("the channels family is not registered yet: GET /api/bots/{botID}/channels not checked")
	} else {
		r := s.get(s.demo.Token, "/api/bots/"+s.demo.BotID+"/channels")
		require.Equal(t, 200, r.Status, "%s", r.Body)
		assert.NotContains(t, string(r.Body), w.SecretToken)
		assert.NotContains(t, string(r.Body), shop.Token)
		var list struct {
			Data []map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &list))
		require.Len(t, list.Data, 1)
		c := list.Data[0]
		assert.Equal(t, id, c["id"])
		assert.Equal(t, "telegram", c["type"])
		assert.Equal(t, "@shop_bot", c["name"])
		assert.Equal(t, out["webhook_url"], c["webhook_url"])
		assert.Equal(t, map[string]any{"bot_id": float64(shop.ID), "username": "shop_bot"}, c["settings"])
		assert.NotContains(t, c, "credentials")
	}

	// Telegram's deliveries reach the channel's webhook and pass verification; a forged
	// secret does not.
	if _, err := families.Named("webhooks"); err == nil {
		ann := fake.User{ID: 5001, FirstName: "Ann", LanguageCode: "en"}
		code, err := tg.Deliver(shop, tg.TextUpdate(ann, "/start"))
		require.NoError(t, err)
		assert.Less(t, code, 300, "a genuine delivery is accepted")
		code, err = tg.Post(w.URL, "forged-secret", tg.TextUpdate(ann, "/start"))
		require.NoError(t, err)
		assert.Equal(t, 401, code)
		code, err = tg.Post(w.URL, "", tg.TextUpdate(ann, "/start"))
		require.NoError(t, err)
		assert.Equal(t, 401, code)
	}

	// A second Telegram channel on the bot, and the same Telegram bot on another bot, are
	// refused before setWebhook could move the first channel's deliveries.
	other := tg.AddBot("other_bot")
	s.secret(other.Token)
	raw, code := s.adminRaw("channel", "connect", "--bot", s.demo.BotID, "--type", "telegram", "--token", other.Token)
	assert.Equal(t, 1, code, "%s", raw)
	assert.Contains(t, string(raw), "already has a telegram channel")
	_, ok = tg.Webhook(other)
	assert.False(t, ok)

	bot2 := s.admin("bot", "create", "--account", s.demo.AccountID, "--name", "Second")["bot_id"]
	raw, code = s.adminRaw("channel", "connect", "--bot", bot2, "--type", "telegram", "--token", shop.Token)
	assert.Equal(t, 1, code, "%s", raw)
	assert.Contains(t, string(raw), "@shop_bot is already connected")
	w2, _ := tg.Webhook(shop)
	assert.Equal(t, w, w2, "the first channel's webhook is untouched")

	// Without --base-url the channel uses the Bot API server serve was started with.
	out = s.admin("channel", "connect", "--bot", bot2, "--type", "telegram", "--token", other.Token, "--name", "Support")
	assert.Equal(t, "Support", out["name"])
	assert.Equal(t, public+"/webhooks/telegram/"+out["channel_id"], out["webhook_url"])
	_, ok = tg.Webhook(other)
	assert.True(t, ok)

	// Disconnecting stops Telegram's deliveries: the webhook is deleted there too.
	if channelsServed() {
		r := s.del(s.demo.Token, "/api/bots/"+bot2+"/channels/"+out["channel_id"])
		require.Equal(t, 204, r.Status, "%s", r.Body)
		_, ok = tg.Webhook(other)
		assert.False(t, ok, "deleteWebhook was called")
		_, ok = tg.Webhook(shop)
		assert.True(t, ok, "the other channel's webhook stays")

		// Deleting a bot stops its channels' deliveries too: the bot's purge (a job, in
		// the worker that holds the secrets key) deletes their webhooks at Telegram.
		s.admin("channel", "connect", "--bot", bot2, "--type", "telegram", "--token", other.Token)
		_, ok = tg.Webhook(other)
		require.True(t, ok)
		r = s.del(s.demo.Token, "/api/bots/"+bot2)
		require.Equal(t, 204, r.Status, "%s", r.Body)
		require.Eventually(t, func() bool { _, ok := tg.Webhook(other); return !ok }, 20*time.Second, 50*time.Millisecond,
			"deleteWebhook was called for the deleted bot's channel")
		_, ok = tg.Webhook(shop)
		assert.True(t, ok, "another bot's channel keeps its webhook")
	}

	for _, c := range tg.Calls() {
		assert.NotEqual(t, 404, c.Status, "no call with a malformed token or an unknown method: %+v", c)
	}
	assert.NotContains(t, s.stderr.String(), shop.Token)
}

func TestTelegramAdminConnectRefusals(t *testing.T) {
	t.Parallel()
	tg := fake.New(t)
	good := tg.AddBot("good_bot")
	revoked := tg.AddBot("revoked_bot")
	tg.RevokeToken(revoked.Token)
	s := start(t)
	s.secret(good.Token)
	s.secret(revoked.Token)
	other := s.newAccount("Other")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing token", []string{"--bot", s.demo.BotID, "--type", "telegram"}, 2, "--token"},
		{"whatsapp", []string{"--bot", s.demo.BotID, "--type", "whatsapp", "--token", good.Token}, 2, "over the API"},
		{"malformed token", []string{"--bot", s.demo.BotID, "--type", "telegram", "--token", "12345:short"}, 2, "--token must be a bot token"},
		{"bad base URL", []string{"--bot", s.demo.BotID, "--type", "telegram", "--token", good.Token, "--base-url", "localhost:1"}, 2, "--base-url"},
		{"bad public URL", []string{"--bot", s.demo.BotID, "--type", "telegram", "--token", good.Token, "--public-url", "ftp://x"}, 2, "--public-url"},
		{"unknown bot", []string{"--bot", "bot_00000000000000000000000000", "--type", "telegram", "--token", good.Token, "--base-url", tg.URL}, 1, "not found"},
		{"bot of another account", []string{"--bot", other.Bot, "--type", "telegram", "--token", good.Token, "--base-url", tg.URL}, 1, "not found in account"},
		{"revoked token", []string{"--bot", s.demo.BotID, "--type", "telegram", "--token", revoked.Token, "--base-url", tg.URL}, 1, "Unauthorized"},
	} {
		raw, code := s.adminRaw(append([]string{"channel", "connect"}, tc.args...)...)
		assert.Equal(t, tc.code, code, "%s: %s", tc.name, raw)
		var m map[string]string
		require.NoError(t, json.Unmarshal(raw, &m), "%s: %s", tc.name, raw)
		assert.Contains(t, m["error"], tc.want, tc.name)
		assert.NotContains(t, string(raw), good.Token, tc.name)
		assert.NotContains(t, string(raw), revoked.Token, tc.name)
	}

	// The bot of another account, with its account named: connected. Without a public URL
	// nothing is registered with Telegram and webhook_url is empty.
	out := s.admin("channel", "connect", "--bot", other.Bot, "--account", other.ID, "--type", "telegram", "--token", good.Token, "--base-url", tg.URL)
	assert.NotEmpty(t, out["channel_id"])
	assert.Empty(t, out["webhook_url"])
	_, ok := tg.Webhook(good)
	assert.False(t, ok)
	for _, c := range tg.Calls() {
		assert.NotEqual(t, "setWebhook", c.Method)
	}
}

// serve refuses a malformed public URL or Bot API server as a usage error (exit 2).
func TestServeRefusesBadProviderFlags(t *testing.T) {
	t.Parallel()
	for want, args := range map[string][]string{
		"--public-url":      {"--public-url", "example.com"},
		"public URL":        {"--public-url", "https://example.com/?q=1"},
		"telegram base URL": {"--telegram-base-url", "ftp://example.com"},
		"--email-rate":      {"--email-rate", "1000000"},
		"--smtp-tls":        {"--smtp-addr", "127.0.0.1:2525", "--smtp-tls", "ssl"},
	} {
		cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", args, out)
		assert.Equal(t, 2, ee.ExitCode(), "%v: %s", args, out)
		assert.Contains(t, string(out), want)
	}
}
