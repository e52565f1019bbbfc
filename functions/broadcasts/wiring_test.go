package broadcasts_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/broadcasts"
	"github.com/botplatform/api/functions/broadcasts/wiring"
	"github.com/botplatform/api/functions/channels/channelstest"
	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// telegramCatalog is a bot whose one channel is Telegram, for publishing.
type telegramCatalog struct{ caps channel.Capabilities }

func (c telegramCatalog) Catalog(context.Context, string) (content.Catalog, error) {
	return content.Catalog{Channels: []channel.Capabilities{c.caps}}, nil
}

// The service as the broadcasts Lambda composes it (wiring.New over the channels service):
// a test send opens the bot's channel's sealed credentials (kms:Decrypt, the Lambda's one use
// of the secrets key; its preflight opens them too) and sends the published content with them
// on the provider. The send job itself runs in the jobs Lambda.
func TestTestSendOpensTheChannelsSealedCredentials(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// The channels Lambda connects the bot's Telegram channel (sealing its token); the
	// content Lambda publishes the message; the runtime (jobs Lambda) records the
	// subscriber, whom the subscribers Lambda labels a tester.
	tg := channelstest.Telegram(t, family.Deps{})
	env, bot := tg.Env, tg.Bot
	docs := content.NewService(env.Store, telegramCatalog{tg.Adapter.Capabilities()}, nil, env.Now)
	asContent := sqlitetest.As(ctx, "content")
	doc, err := docs.Create(asContent, bot, content.NewDocument{Type: content.TypeMessage, Name: "Sale",
		Draft: json.RawMessage(`{"text":"Hi {{ subscriber.first_name }}, the sale is on"}`)})
	require.NoError(t, err)
	_, err = docs.Publish(asContent, bot, doc.ID, doc.Revision)
	require.NoError(t, err)
	subs := subscribers.NewService(env.Store, env.Now, nil)
	label, err := subs.CreateLabel(sqlitetest.As(ctx, "subscribers"), bot, broadcasts.TesterLabel)
	require.NoError(t, err)
	first := "Ann"
	sub, _, err := subs.Upsert(sqlitetest.As(ctx, "jobs"), bot, string(channel.Telegram), "4242",
		subscribers.Changes{FirstName: &first, AddLabels: []string{label.ID}})
	require.NoError(t, err)

	svc, err := wiring.New(env, broadcasts.Config{})
	require.NoError(t, err)
	name := "Sale"
	b, err := svc.Create(ctx, bot, broadcasts.Definition{Name: &name, Content: &broadcasts.ContentRef{DocumentID: doc.ID},
		Channels: &[]channel.Kind{channel.Telegram}})
	require.NoError(t, err)
	res, err := svc.TestSend(ctx, bot, b.ID, sub.ID)
	require.NoError(t, err)
	assert.Equal(t, "telegram", res.Channel)
	assert.Equal(t, 1, res.Version)
	assert.NotEmpty(t, res.MessageID)

	// Telegram took it from the bot whose token was sealed, for the subscriber's chat.
	sent := tg.Fake.Sent(4242)
	require.Len(t, sent, 1)
	assert.Equal(t, tg.TelegramBot.ID, sent[0].BotID)
	assert.Equal(t, "Hi Ann, the sale is on", sent[0].Text)
}
