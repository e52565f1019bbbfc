package bots

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// starter records the jobs started, immediately or delayed.
type starter struct {
	mu      sync.Mutex
	started []string // kind, payload, delay
	fail    error
}

func (s *starter) Start(ctx context.Context, kind string, payload any) error {
	return s.StartAfter(ctx, 0, kind, payload)
}

func (s *starter) StartAfter(_ context.Context, delay time.Duration, kind string, payload any) error {
	if s.fail != nil {
		return s.fail
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, kind+" "+string(b)+" "+delay.String())
	return nil
}

func TestDeleteStartsThePurge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	j := &starter{}
	svc := f.svc.WithPurge(j, slog.New(slog.DiscardHandler))
	b := f.bot(t, "a")

	err := svc.Delete(ctx, f.acct, b.ID, ptr(int64(7)))
	assert.Equal(t, 409, problem(t, err).Status())
	assert.Empty(t, j.started, "no deletion, no purge")

	require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil))
	payload := `{"account_id":"` + f.acct + `","bot_id":"` + b.ID + `"}`
	assert.Equal(t, []string{
		purge.Job + " " + payload + " 0s",
		purge.Job + " " + payload + " " + purge.SweepDelay.String(),
	}, j.started, "a pass at once and one after the writes under way have landed")
}

func TestDeleteWithoutAPurgeIsLogged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, c := range []struct {
		name string
		jobs *starter
		want string
	}{
		{"no job runner", nil, "this process runs no jobs"},
		{"the queue refuses", &starter{fail: errors.New("queue down")}, "queue down"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			var logs bytes.Buffer
			svc := f.svc.WithPurge(nil, slog.New(slog.NewTextHandler(&logs, nil)))
			if c.jobs != nil {
				svc = f.svc.WithPurge(c.jobs, slog.New(slog.NewTextHandler(&logs, nil)))
			}
			b := f.bot(t, "a")
			require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil), "the bot is deleted all the same")
			_, err := f.svc.Get(ctx, f.acct, b.ID)
			assert.Equal(t, 404, problem(t, err).Status())
			assert.Contains(t, logs.String(), "level=ERROR")
			assert.Contains(t, logs.String(), c.want)
			assert.Contains(t, logs.String(), "bot_id="+b.ID, "an operator can start it by hand")
		})
	}
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
		var committed []string
		changed := false
		svc := f.svc.WithDependents(func(ctx context.Context, bot string) ([]store.Write, func(context.Context), error) {
			it, err := f.store.Get(ctx, dep)
			require.NoError(t, err)
			if !changed { // a concurrent writer moves it after it was read, once
				changed = true
				require.NoError(t, f.store.Put(ctx, store.Item{Key: dep, Revision: 2}, store.Always))
			}
			return []store.Write{store.DeleteOp(dep, store.RevisionIs(it.Revision))},
				func(context.Context) { committed = append(committed, bot) }, nil
		})
		require.NoError(t, svc.Delete(ctx, f.acct, b.ID, nil))
		_, err := f.store.Get(ctx, dep)
		assert.ErrorIs(t, err, store.ErrNotFound, "read again and deleted")
		assert.Equal(t, []string{b.ID}, committed, "told once, after the commit")
	})

	t.Run("or the bot stays", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		svc := f.svc.WithDependents(func(context.Context, string) ([]store.Write, func(context.Context), error) {
			return nil, nil, errors.New("store down")
		})
		require.Error(t, svc.Delete(ctx, f.acct, b.ID, nil))
		_, err := f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err)
	})
}
