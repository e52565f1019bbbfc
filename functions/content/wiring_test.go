package content_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/content/wiring"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/telegram"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	tgfake "github.com/botplatform/api/tests/fakes/telegram"
)

// The service as the content Lambda composes it (wiring.New over the channels service): a
// test send of a message opens the bot's channel's sealed credentials (kms:Decrypt, the
// Lambda's one use of the secrets key) and sends with them on the provider.
func TestTestSendOpensTheChannelsSealedCredentials(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tg := tgfake.New(t)
	tgBot := tg.AddBot("demo_bot")
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	env := familytest.Env(t, family.Deps{Secrets: key, PublicURL: "https://api.example.com",
		Adapters: []channel.Adapter{telegram.New(telegram.Config{BaseURL: tg.URL})}})
	bot := ids.New("bot")

	// The channels Lambda connects the bot's Telegram channel (sealing its token); the
	// runtime (jobs Lambda) records the subscriber, whom the subscribers Lambda labels a tester.
	_, err = channels.FromEnv(env).Connect(sqlitetest.As(ctx, "channels"), "acct_1", bot, channel.Telegram, "",
		&telegram.Credentials{Token: tgBot.Token})
	require.NoError(t, err)
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
	sent := tg.Sent(4242)
	require.Len(t, sent, 1)
	assert.Equal(t, tgBot.ID, sent[0].BotID)
	assert.Equal(t, "Hi Ann", sent[0].Text)
}
