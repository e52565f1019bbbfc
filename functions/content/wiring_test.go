package content_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/channels/channelstest"
	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/content/wiring"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The service as the content Lambda composes it (wiring.New over the channels service): a
// test send of a message opens the bot's channel's sealed credentials (kms:Decrypt, the
// Lambda's one use of the secrets key) and sends with them on the provider.
func TestTestSendOpensTheChannelsSealedCredentials(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The channels Lambda connects the bot's Telegram channel (sealing its token); the
	// runtime (jobs Lambda) records the subscriber, whom the subscribers Lambda labels a tester.
	tg := channelstest.Telegram(t, family.Deps{})
	env, bot := tg.Env, tg.Bot
	subs := subscribers.NewService(env.Store, env.Now, nil)
	label, err := subs.CreateLabel(sqlitetest.As(ctx, "subscribers"), bot, content.TesterLabel)
	require.NoError(t, err)
	first := "Ann"
	sub, _, err := subs.Upsert(sqlitetest.As(ctx, "jobs"), bot, string(channel.Telegram), "4242",
		subscribers.Changes{FirstName: &first, AddLabels: []string{label.ID}})
	require.NoError(t, err)

	svc := wiring.New(env)
	doc, err := svc.Create(ctx, bot, content.NewDocument{Type: content.TypeMessage, Name: "Welcome",
		Draft: json.RawMessage(`{"text":"Hi {{ subscriber.first_name }}"}`)})
	require.NoError(t, err)
	res, err := svc.TestSend(ctx, bot, doc.ID, sub.ID)
	require.NoError(t, err)
	assert.Equal(t, "telegram", res.Via)
	assert.NotEmpty(t, res.MessageID)

	// Telegram took it from the bot whose token was sealed, for the subscriber's chat.
	sent := tg.Fake.Sent(4242)
	require.Len(t, sent, 1)
	assert.Equal(t, tg.TelegramBot.ID, sent[0].BotID)
	assert.Equal(t, "Hi Ann", sent[0].Text)
}
