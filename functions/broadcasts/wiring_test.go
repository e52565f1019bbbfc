package broadcasts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/broadcasts"
	"github.com/botplatform/api/functions/broadcasts/wiring"
	"github.com/botplatform/api/functions/channels/channelstest"
	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
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

// failingQueries makes every Query of the store fail with err while it is set: the send's
// plan reads the audience with queries, its progress and record with point reads.
type failingQueries struct {
	store.Store
	err atomic.Pointer[error]
}

func (f *failingQueries) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := f.err.Load(); err != nil {
		return store.Page{}, *err
	}
	return f.Store.Query(ctx, q)
}

// A send step that keeps failing for a reason that does not pass (a bug; here the audience
// read) is retried by the queue, and its third failure pauses the broadcast with
// status_reason send_failed instead of leaving it running with its step dead-lettered; the
// store being unavailable is no failure: the step runs again later (jobs.Later). Resumed once
// the cause is gone, the broadcast sends.
func TestFailingSendStepPausesTheBroadcast(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tg := channelstest.Telegram(t, family.Deps{})
	env, bot := tg.Env, tg.Bot
	docs := content.NewService(env.Store, telegramCatalog{tg.Adapter.Capabilities()}, nil, env.Now)
	doc, err := docs.Create(ctx, bot, content.NewDocument{Type: content.TypeMessage, Name: "Sale", Draft: json.RawMessage(`{"text":"The sale is on"}`)})
	require.NoError(t, err)
	_, err = docs.Publish(ctx, bot, doc.ID, doc.Revision)
	require.NoError(t, err)
	_, _, err = subscribers.NewService(env.Store, env.Now, nil).Upsert(ctx, bot, string(channel.Telegram), "4242", subscribers.Changes{})
	require.NoError(t, err)

	flaky := &failingQueries{Store: env.Store}
	fenv := *env
	fenv.Store = flaky
	svc, err := wiring.New(&fenv, broadcasts.Config{})
	require.NoError(t, err)
	name := "Sale"
	b, err := svc.Create(ctx, bot, broadcasts.Definition{Name: &name, Content: &broadcasts.ContentRef{DocumentID: doc.ID},
		Channels: &[]channel.Kind{channel.Telegram}})
	require.NoError(t, err)
	b, err = svc.Schedule(ctx, bot, b.ID, b.Revision, nil)
	require.NoError(t, err)
	payload, err := json.Marshal(map[string]any{"bot_id": bot, "broadcast_id": b.ID, "epoch": 1})
	require.NoError(t, err)

	unavailable := fmt.Errorf("throttled: %w", store.ErrUnavailable)
	flaky.err.Store(&unavailable)
	_, _, err = svc.SendStep(ctx, payload, "")
	d, later := jobs.LaterDelay(err)
	require.True(t, later, "the store being unavailable passes: %v", err)
	assert.Equal(t, 30*time.Second, d)

	bug := errors.New("audience: a bug")
	flaky.err.Store(&bug)
	for i := 1; i < jobs.MaxStepFailures; i++ {
		_, _, err := svc.SendStep(ctx, payload, "")
		require.ErrorContains(t, err, "a bug", "attempt %d fails: the queue runs it again", i)
		got, err := svc.Get(ctx, bot, b.ID)
		require.NoError(t, err)
		assert.Equal(t, broadcasts.Running, got.Status)
	}
	_, done, err := svc.SendStep(ctx, payload, "")
	require.NoError(t, err, "the last failure pauses the broadcast and ends the job")
	assert.True(t, done)
	got, err := svc.Get(ctx, bot, b.ID)
	require.NoError(t, err)
	assert.Equal(t, broadcasts.Paused, got.Status)
	assert.Equal(t, broadcasts.ReasonSendFailed, got.StatusReason)

	flaky.err.Store(nil)
	got, err = svc.Resume(ctx, bot, b.ID, got.Revision)
	require.NoError(t, err)
	payload, err = json.Marshal(map[string]any{"bot_id": bot, "broadcast_id": b.ID, "epoch": 2})
	require.NoError(t, err)
	cursor := ""
	for range 20 {
		next, done, err := svc.SendStep(ctx, payload, cursor)
		require.NoError(t, err)
		if done {
			break
		}
		cursor = next
	}
	require.Len(t, tg.Fake.Sent(4242), 1, "sent once the cause is gone")
}
