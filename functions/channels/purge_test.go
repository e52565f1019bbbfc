package channels

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// connectAll connects a channel of every type to bot (two of them with lookup keys).
func connectAll(t *testing.T, s *Service, bot string) []Channel {
	t.Helper()
	var out []Channel
	for _, k := range []channel.Kind{channel.Telegram, channel.WhatsApp, channel.VK} {
		c, err := s.Connect(t.Context(), "acct_"+bot, bot, k, "", &fakeCreds{Key: "good"})
		require.NoError(t, err)
		out = append(out, c)
	}
	return out
}

// newPurgeService has adapters whose lookup keys differ per bot.
func newPurgeService(t *testing.T) (*Service, *releasingAdapter) {
	t.Helper()
	vk := &releasingAdapter{fakeAdapter: fakeAdapter{kind: channel.VK}}
	s := newService(t, "https://api.example.com", &fakeAdapter{kind: channel.Telegram}, &lookupPerBot{fakeAdapter{kind: channel.WhatsApp}}, vk)
	return s, vk
}

// lookupPerBot gives each connection its own lookup key, as a phone number id would be.
type lookupPerBot struct{ fakeAdapter }

func (l *lookupPerBot) Connect(ctx context.Context, req channel.ConnectRequest) (channel.ConnectResult, error) {
	res, err := l.fakeAdapter.Connect(ctx, req)
	res.LookupKey = "phone-" + req.ChannelID
	return res, err
}

// mentioning returns what the store still holds that names any of needles.
func mentioning(t *testing.T, s *Service, needles ...string) []store.Item {
	t.Helper()
	items, err := s.store.(*sqlitetest.Store).Mentioning(t.Context(), needles...)
	require.NoError(t, err)
	return items
}

func channelIDs(chs []Channel) []string {
	var out []string
	for _, c := range chs {
		out = append(out, c.ID)
	}
	return out
}

func TestBotDeletesGoWithTheBot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, vk := newPurgeService(t)
	mine, other := connectAll(t, s, "bot_a"), connectAll(t, s, "bot_b")
	before := mentioning(t, s, append(channelIDs(other), "bot_b")...)

	writes, err := BotDeletes(s.store, s.now)(ctx, "bot_a")
	require.NoError(t, err)
	require.NoError(t, s.store.Transact(ctx, writes), "the bot's deletion transaction")

	for _, c := range mine {
		_, err := s.Resolve(ctx, c.ID)
		assert.Error(t, err, "a webhook naming the channel is refused at once")
	}
	_, err = s.ResolveKey(ctx, channel.WhatsApp, "phone-"+mine[1].ID)
	assert.Error(t, err)
	_, err = s.ResolveBot(ctx, "bot_a", channel.Telegram)
	assert.Error(t, err)
	left := mentioning(t, s, append(channelIDs(mine), "bot_a")...)
	require.Len(t, left, len(mine), "only the release items are left")
	for _, it := range left {
		assert.Equal(t, releasePartition("bot_a"), it.PK)
		assert.False(t, it.ExpiresAt.IsZero(), "sealed credentials never stay for good")
		assert.NotContains(t, string(it.Data), "good", "the credentials stay sealed")
	}
	assert.Empty(t, vk.released, "the provider is told by the purge, not by the deletion")

	// The purge runs in the jobs worker, which holds the secrets key.
	jobs := sqlitetest.As(ctx, "jobs")
	require.NoError(t, purge.Run(jobs, PurgeStep(s.store, s), purge.Payload{AccountID: "acct_bot_a", BotID: "bot_a"}))
	require.Len(t, vk.released, 1, "the provider's registration is released")
	assert.Equal(t, mine[2].ID, vk.released[0].ChannelID)
	assert.JSONEq(t, `{"key":"good"}`, string(vk.released[0].Credentials), "with the channel's opened credentials")
	assert.Empty(t, mentioning(t, s, append(channelIDs(mine), "bot_a")...), "records, type keys, lookup keys and release items")
	assert.Equal(t, before, mentioning(t, s, append(channelIDs(other), "bot_b")...), "another bot's channels are untouched")

	// A second pass (the purge's sweep) finds nothing to release again.
	require.NoError(t, purge.Run(jobs, PurgeStep(s.store, s), purge.Payload{AccountID: "acct_bot_a", BotID: "bot_a"}))
	assert.Len(t, vk.released, 1)

	writes, err = BotDeletes(s.store, s.now)(ctx, "bot_none")
	require.NoError(t, err)
	assert.Empty(t, writes, "a bot without channels adds nothing to its deletion")
}

func TestPurgeStepErasesChannels(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, vk := newPurgeService(t)
	mine, other := connectAll(t, s, "bot_a"), connectAll(t, s, "bot_b")
	before := mentioning(t, s, append(channelIDs(other), "bot_b")...)
	// A type key whose channel is gone (as a crash between two writes could leave, were
	// they not one transaction) is erased too.
	require.NoError(t, s.store.Delete(ctx, recordKey(mine[0].ID), store.Always))

	// The channels connected while the bot's deletion was under way: released and erased.
	require.NoError(t, purge.Run(sqlitetest.As(ctx, "jobs"), PurgeStep(s.store, s), purge.Payload{AccountID: "acct_bot_a", BotID: "bot_a"}))

	assert.Empty(t, mentioning(t, s, append(channelIDs(mine), "bot_a")...), "records, sealed credentials, type and lookup keys")
	_, err := s.ResolveKey(ctx, channel.WhatsApp, "phone-"+mine[1].ID)
	assert.Error(t, err)
	require.Len(t, vk.released, 1)
	assert.Equal(t, mine[2].ID, vk.released[0].ChannelID)
	assert.Equal(t, before, mentioning(t, s, append(channelIDs(other), "bot_b")...), "another bot's channels are untouched")
}

// Without the secrets key (a process that holds none), the purge still erases everything;
// it only cannot tell the providers.
func TestPurgeStepWithoutSecrets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, vk := newPurgeService(t)
	mine := connectAll(t, s, "bot_a")
	writes, err := BotDeletes(s.store, s.now)(ctx, "bot_a")
	require.NoError(t, err)
	require.NoError(t, s.store.Transact(ctx, writes))

	require.NoError(t, purge.Run(ctx, PurgeStep(s.store, nil), purge.Payload{AccountID: "acct_bot_a", BotID: "bot_a"}))
	assert.Empty(t, mentioning(t, s, append(channelIDs(mine), "bot_a")...))
	assert.Empty(t, vk.released)
}
