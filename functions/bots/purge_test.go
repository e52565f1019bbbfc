package bots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/store"
)

// newOutbox is the outbox the platform gives the bots family, over the fixture's store and
// clock, delivering to q.
func (f *fixture) newOutbox(t *testing.T, q queue.Sender, log *slog.Logger) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(f.store, q, outbox.Config{Now: f.clock.Now, Log: log})
	require.NoError(t, err)
	return o
}

// purgeStarts is what a deletion of the bot must send: the purge job at once and again
// purge.SweepDelay later.
func (f *fixture) purgeStarts(t *testing.T, bot string) []queue.Message {
	t.Helper()
	msgs, err := purge.StartMessages(purge.Payload{AccountID: f.acct, BotID: bot})
	require.NoError(t, err)
	return msgs
}

func TestDeleteStartsThePurge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	q := &queuetest.Sender{}
	box := f.newOutbox(t, q, nil)
	svc := f.svc.WithPurge(box, slog.New(slog.DiscardHandler))
	b := f.bot(t, "a")

	err := svc.Delete(ctx, f.acct, b.ID, ptr(int64(7)))
	assert.Equal(t, 409, httpapitest.AsError(t, err).Status())
	f.clock.Advance(time.Hour)
	res, err := box.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.Delivered)
	assert.Empty(t, q.Take(), "no deletion, no purge")

	require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil))
	sent := q.Take()
	assert.Equal(t, f.purgeStarts(t, b.ID), sent, "a pass at once and one after the writes under way have landed")
	assert.Zero(t, sent[0].Delay)
	assert.Equal(t, purge.SweepDelay, sent[1].Delay)
	f.clock.Advance(time.Hour)
	res, err = box.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.Delivered, "sent once: the outbox is empty")
}

// The queue refuses the purge's start after the deletion committed (or the process dies
// before sending it): the deletion stands, and the outbox's sweep starts the purge, with
// what is left of the second pass's delay. The purge of a deleted bot always runs.
func TestDeletePurgeSurvivesAFailedSend(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	down := &queuetest.Sender{}
	down.Fail(errors.New("queue down"))
	for _, c := range []struct {
		name string
		q    *queuetest.Sender
	}{
		{"the queue refuses", down},
		{"the process dies before sending", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			var inRequest queue.Sender // none: the process "dies" before it could send
			if c.q != nil {
				inRequest = c.q
			}
			svc := f.svc.WithPurge(f.newOutbox(t, inRequest, log), log)
			b := f.bot(t, "a")
			require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil), "the bot is deleted all the same")
			_, err := f.svc.Get(ctx, f.acct, b.ID)
			assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
			assert.NotContains(t, logs.String(), "level=ERROR", "nothing is lost, so nothing for an operator to do")

			// A restarted process, or the next scheduled sweep, with a queue that works.
			q := &queuetest.Sender{}
			relay := f.newOutbox(t, q, log)
			f.clock.Advance(time.Minute)
			res, err := relay.Sweep(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, res.Delivered)
			sent := q.Take()
			want := f.purgeStarts(t, b.ID)
			require.Len(t, sent, len(want))
			for i := range want {
				assert.Equal(t, want[i].Type, sent[i].Type)
				assert.JSONEq(t, string(want[i].Body), string(sent[i].Body))
			}
			assert.Zero(t, sent[0].Delay)
			assert.Equal(t, purge.SweepDelay-time.Minute, sent[1].Delay, "the second pass keeps its time")
		})
	}
}

func TestDeleteWithoutAnOutboxIsLogged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	var logs bytes.Buffer
	svc := f.svc.WithPurge(nil, slog.New(slog.NewTextHandler(&logs, nil)))
	b := f.bot(t, "a")
	require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil), "the bot is deleted all the same")
	_, err := f.svc.Get(ctx, f.acct, b.ID)
	assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
	assert.Contains(t, logs.String(), "level=ERROR")
	assert.Contains(t, logs.String(), "this process runs no jobs")
	assert.Contains(t, logs.String(), "bot_id="+b.ID, "an operator can start it by hand")
}

// failingOutbox cannot stage.
type failingOutbox struct{}

func (failingOutbox) Stage(...queue.Message) ([]store.Write, func(context.Context), error) {
	return nil, nil, errors.New("outbox broken")
}

// A purge that cannot be staged fails the deletion: the bot is never deleted without it.
func TestDeleteWithoutItsPurgeDoesNotHappen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	svc := f.svc.WithPurge(failingOutbox{}, slog.New(slog.DiscardHandler))
	b := f.bot(t, "a")
	require.ErrorContains(t, svc.Delete(ctx, f.acct, b.ID, nil), "outbox broken")
	_, err := f.svc.Get(ctx, f.acct, b.ID)
	require.NoError(t, err, "still there")
}

// transactSizes records the size of every transaction.
type transactSizes struct {
	store.Store
	mu    sync.Mutex
	sizes []int
}

func (s *transactSizes) Transact(ctx context.Context, writes []store.Write) error {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(writes))
	s.mu.Unlock()
	return s.Store.Transact(ctx, writes)
}

// The deletion's transaction at its largest: the bot, its most tokens (each with its
// credential, and the token counter), a channel of each type (record, type key, lookup key,
// as channels.BotDeletes writes them) and the purge's outbox item. It fits
// store.MaxTransactWrites with room to spare.
func TestDeleteTransactionAtItsLargest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	b := f.bot(t, "a")
	for range auth.MaxBotTokensPerBot {
		_, _, err := f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "t")
		require.NoError(t, err)
	}
	// A channel's record, type key, lookup key and release item (channels.BotDeletes).
	const channelTypes, writesPerChannel = 3, 4
	var dependents []store.Write
	for i := range channelTypes * writesPerChannel {
		k := store.Key{PK: "BOT#" + b.ID + "#CHANNELS", SK: fmt.Sprint(i)}
		require.NoError(t, f.store.Put(ctx, store.Item{Key: k, Revision: 1}, store.Always))
		dependents = append(dependents, store.DeleteOp(k, store.RevisionIs(1)))
	}
	sizes := &transactSizes{Store: f.store}
	box, err := outbox.New(sizes, &queuetest.Sender{}, outbox.Config{Now: f.clock.Now})
	require.NoError(t, err)
	svc := NewService(sizes, f.auth, f.clock.Now).
		WithDependents(func(context.Context, string) ([]store.Write, error) {
			return dependents, nil
		}).
		WithPurge(box, slog.New(slog.DiscardHandler))
	require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil))
	want := 1 + (1 + 2*auth.MaxBotTokensPerBot) + channelTypes*writesPerChannel + 1
	assert.Equal(t, []int{want}, sizes.sizes, "one transaction")
	assert.LessOrEqual(t, want, store.MaxTransactWrites)
}

func TestDeleteTakesItsDependentsAlong(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("in the same transaction", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		dep := store.Key{PK: "BOT#" + b.ID + "#CHANNELTYPE", SK: "telegram"}
		require.NoError(t, f.store.Put(ctx, store.Item{Key: dep, Revision: 1}, store.Always))
		changed := false
		svc := f.svc.WithDependents(func(ctx context.Context, bot string) ([]store.Write, error) {
			it, err := f.store.Get(ctx, dep)
			require.NoError(t, err)
			if !changed { // a concurrent writer moves it after it was read, once
				changed = true
				require.NoError(t, f.store.Put(ctx, store.Item{Key: dep, Revision: 2}, store.Always))
			}
			return []store.Write{store.DeleteOp(dep, store.RevisionIs(it.Revision))}, nil
		})
		require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil))
		_, err := f.store.Get(ctx, dep)
		assert.ErrorIs(t, err, store.ErrNotFound, "read again and deleted")
	})

	t.Run("or the bot stays", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		svc := f.svc.WithDependents(func(context.Context, string) ([]store.Write, error) {
			return nil, errors.New("store down")
		})
		require.Error(t, svc.Delete(ctx, f.acct, b.ID, nil))
		_, err := f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err)
	})
}
