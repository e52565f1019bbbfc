package channels

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
)

// releasingAdapter registers something with its provider at connect (as VK's callback
// server) and records the channels it was asked to release.
type releasingAdapter struct {
	fakeAdapter
	mu       sync.Mutex
	released []channel.Connection
}

func (r *releasingAdapter) Disconnect(_ context.Context, conn channel.Connection) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, conn)
	return nil
}

var _ channel.Disconnector = (*releasingAdapter)(nil)

func TestDisconnectorReleasesProviderSide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vk := &releasingAdapter{fakeAdapter: fakeAdapter{kind: channel.VK, lookup: "group-1"}}
	s := newService(t, "https://api.example.com", vk)

	c, err := s.Connect(ctx, "acct_a", "bot_a", channel.VK, "", &fakeCreds{Key: "good"})
	require.NoError(t, err)
	assert.Empty(t, vk.released, "a stored channel keeps its webhook")

	// Refused by the store (the bot has a VK channel; the community is another bot's): the
	// webhook just registered with the provider is released again.
	_, err = s.Connect(ctx, "acct_a", "bot_a", channel.VK, "", &fakeCreds{Key: "good"})
	assert.Equal(t, "channel_exists", problemCode(err))
	_, err = s.Connect(ctx, "acct_b", "bot_b", channel.VK, "", &fakeCreds{Key: "good"})
	assert.Equal(t, "channel_in_use", problemCode(err))
	require.Len(t, vk.released, 2)
	for i, r := range vk.released {
		assert.Equal(t, vk.requests[i+1].ChannelID, r.ChannelID)
		assert.Equal(t, vk.requests[i+1].WebhookSecret, r.WebhookSecret)
		assert.JSONEq(t, `{"key":"good"}`, string(r.Credentials))
	}

	// Disconnect releases the stored channel's registration with its opened credentials.
	require.NoError(t, s.Disconnect(ctx, "bot_a", c.ID))
	require.Len(t, vk.released, 3)
	assert.Equal(t, c.ID, vk.released[2].ChannelID)
	assert.Equal(t, vk.requests[0].WebhookSecret, vk.released[2].WebhookSecret)
	assert.JSONEq(t, `{"key":"good"}`, string(vk.released[2].Credentials))

	// A refused provider check registered nothing: nothing to release.
	_, err = s.Connect(ctx, "acct_a", "bot_a", channel.VK, "", &fakeCreds{Key: "bad"})
	assert.Equal(t, "credentials_rejected", problemCode(err))
	assert.Len(t, vk.released, 3)
}
