package webhooks_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/channels/channelstest"
	"github.com/botplatform/api/functions/webhooks/wiring"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/queue/queuetest"
	tgfake "github.com/botplatform/api/tests/fakes/telegram"
)

// The family as its Lambda composes it (wiring.Family over the channels service): a
// Telegram delivery is verified against the webhook secret the channels Lambda sealed when
// it connected the channel, which the webhooks Lambda opens (kms:Decrypt, its one use of the
// secrets key) with the channel's credentials; only then is the update enqueued.
func TestDeliveryOpensTheChannelsSealedWebhookSecret(t *testing.T) {
	t.Parallel()
	// The channels Lambda connects the channel: it seals the token and a fresh webhook
	// secret, which it registers with Telegram.
	q := &queuetest.Sender{}
	tg := channelstest.Telegram(t, family.Deps{Queue: q})
	env, bot, c := tg.Env, tg.Bot, tg.Channel
	hook, ok := tg.Fake.Webhook(tg.TelegramBot)
	require.True(t, ok)
	require.NotEmpty(t, hook.SecretToken)
	path := "/webhooks/telegram/" + c.ID
	assert.Equal(t, channelstest.PublicURL+path, hook.URL)

	srv := httpapitest.New(t, httpapitest.Config{Now: time.Now, Store: env.Store})
	wiring.Family().Build(env).Routes(srv.Mux)
	user := tgfake.User{ID: 4242, FirstName: "Ann"}
	post := func(secret string) httpapitest.Reply {
		return srv.DoAs(t, "", http.MethodPost, path, tg.Fake.TextUpdate(user, "/start"),
			"Content-Type", "application/json", "X-Telegram-Bot-Api-Secret-Token", secret)
	}

	// Another secret than the sealed one: 401, nothing enqueued.
	assert.Equal(t, http.StatusUnauthorized, post("forged-secret").Code)
	assert.Empty(t, queuetest.Decode[channel.Delivery](t, q.Sent()))

	// The secret Telegram was given: the update goes to the runtime, for the channel's bot.
	w := post(hook.SecretToken)
	require.Equal(t, http.StatusOK, w.Code, w.Body)
	got := queuetest.Decode[channel.Delivery](t, q.Sent())
	require.Len(t, got, 1)
	assert.Equal(t, c.ID, got[0].ChannelID)
	assert.Equal(t, bot, got[0].BotID)
	assert.Equal(t, tg.Account, got[0].AccountID)
	assert.Equal(t, "/start", got[0].Inbound.Text)
}
