package purge

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// countingStore counts the deletes of each transaction.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	deletes int
	largest int
}

func (s *countingStore) Transact(ctx context.Context, writes []store.Write) error {
	s.mu.Lock()
	n := 0
	for _, w := range writes {
		if w.Delete != nil {
			n++
		}
	}
	s.deletes += n
	s.largest = max(s.largest, len(writes))
	s.mu.Unlock()
	return s.Store.Transact(ctx, writes)
}

func (s *countingStore) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.deletes
	s.deletes = 0
	return n
}

func open(t *testing.T) (*countingStore, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return &countingStore{Store: st}, st
}

func fill(t *testing.T, st store.Store, pk string, n int, data func(i int) string) {
	t.Helper()
	for i := 0; i < n; i += store.MaxTransactWrites {
		var writes []store.Write
		for j := i; j < min(n, i+store.MaxTransactWrites); j++ {
			it := store.Item{Key: store.Key{PK: pk, SK: fmt.Sprintf("%05d", j)}}
			if data != nil {
				it.Data = []byte(data(j))
			}
			writes = append(writes, store.PutOp(it, store.Always))
		}
		require.NoError(t, st.Transact(t.Context(), writes))
	}
}

var payload = json.RawMessage(`{"account_id":"acct_1","bot_id":"bot_1"}`)

// plan: a plain partition, then a directory whose items each lead to two partitions.
func testPlan(_ context.Context, p Payload) ([]Part, error) {
	return []Part{
		{PK: "BOT#" + p.BotID + "#PLAIN"},
		{PK: "BOT#" + p.BotID + "#DIR", Dependents: func(_ context.Context, it store.Item) ([]string, error) {
			return []string{"BOT#" + p.BotID + "#A#" + it.SK, "BOT#" + p.BotID + "#B#" + it.SK}, nil
		}},
	}, nil
}

// run drives step to the end, running every step twice (a runner may repeat one).
func run(t *testing.T, cs *countingStore, step jobs.Step) {
	t.Helper()
	cursor, steps := "", 0
	for {
		require.Less(t, steps, 1000, "the purge must finish")
		cs.take()
		next, done, err := step(t.Context(), payload, cursor)
		require.NoError(t, err)
		assert.LessOrEqual(t, cs.take(), MaxDeletes, "one step's deletes")
		again, doneAgain, err := step(t.Context(), payload, cursor)
		require.NoError(t, err, "a repeated step does not fail on what is gone")
		assert.LessOrEqual(t, cs.take(), MaxDeletes)
		steps++
		if done {
			assert.True(t, doneAgain)
			return
		}
		_ = again // the repeat may have got further; the runner continues from the first
		cursor = next
	}
}

func TestStepErasesEveryPartInBoundedSteps(t *testing.T) {
	t.Parallel()
	cs, st := open(t)
	fill(t, st, "BOT#bot_1#PLAIN", 450, nil)
	fill(t, st, "BOT#bot_1#DIR", 3, nil)
	for i := range 3 {
		fill(t, st, fmt.Sprintf("BOT#bot_1#A#%05d", i), 250, nil)
		fill(t, st, fmt.Sprintf("BOT#bot_1#B#%05d", i), 20, nil)
	}
	fill(t, st, "BOT#bot_2#PLAIN", 10, nil)
	fill(t, st, "BOT#bot_1#PLAINX", 5, nil) // another partition sharing the prefix

	run(t, cs, Step(cs, testPlan))
	assert.LessOrEqual(t, cs.largest, store.MaxTransactWrites)

	left, err := st.Mentioning(t.Context(), "bot_1")
	require.NoError(t, err)
	require.Len(t, left, 5)
	assert.Equal(t, "BOT#bot_1#PLAINX", left[0].PK, "only the plan's partitions")
	other, err := st.Mentioning(t.Context(), "bot_2")
	require.NoError(t, err)
	assert.Len(t, other, 10, "another bot's data is untouched")
}

func TestStepWithItsOwnDeletes(t *testing.T) {
	t.Parallel()
	cs, st := open(t)
	// Items that point to a key elsewhere, deleted together with it.
	fill(t, st, "BOT#bot_1#PTR", 120, func(i int) string { return fmt.Sprintf(`"KEY#%d"`, i) })
	for i := range 120 {
		require.NoError(t, st.Put(t.Context(), store.Item{Key: store.Key{PK: fmt.Sprintf("KEY#%d", i), SK: "K"}, Data: []byte(`"bot_1"`)}, store.Always))
	}
	plan := func(_ context.Context, p Payload) ([]Part, error) {
		return []Part{{PK: "BOT#" + p.BotID + "#PTR", Delete: func(ctx context.Context, it store.Item) ([]store.Write, error) {
			var other string
			if err := json.Unmarshal(it.Data, &other); err != nil {
				return nil, err
			}
			return []store.Write{store.DeleteOp(it.Key, store.MustExist), store.DeleteOp(store.Key{PK: other, SK: "K"}, store.Always)}, nil
		}}}, nil
	}
	run(t, cs, Step(cs, plan))
	left, err := st.Mentioning(t.Context(), "bot_1")
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestStepResumesWhereThePlanChanged(t *testing.T) {
	t.Parallel()
	cs, st := open(t)
	fill(t, st, "BOT#bot_1#PLAIN", 5, nil)
	cursor, err := json.Marshal(position{PK: "BOT#bot_1#GONE"})
	require.NoError(t, err)
	_, done, err := Step(cs, testPlan)(t.Context(), payload, string(cursor))
	require.NoError(t, err)
	assert.True(t, done, "a cursor for a part the plan no longer has starts over")
	left, err := st.Mentioning(t.Context(), "bot_1")
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestStepRefusesBadInput(t *testing.T) {
	t.Parallel()
	cs, _ := open(t)
	step := Step(cs, testPlan)
	for _, raw := range []string{`{}`, `{"bot_id":"bot_1"}`, `[`} {
		_, _, err := step(t.Context(), json.RawMessage(raw), "")
		assert.Error(t, err, raw)
	}
	_, _, err := step(t.Context(), payload, "{")
	assert.ErrorContains(t, err, "cursor")
	_, _, err = step(t.Context(), payload, `{"pk":"x"}`)
	assert.NoError(t, err)
	assert.True(t, strings.HasPrefix(Job, "bots."))
}

// A deletion starts the job twice: at once, and SweepDelay later, each as the runner's own
// start message.
func TestStartMessages(t *testing.T) {
	t.Parallel()
	p := Payload{AccountID: "acct_1", BotID: "bot_1"}
	msgs, err := StartMessages(p)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	for i, delay := range []time.Duration{0, SweepDelay} {
		want, err := jobs.StartMessage(delay, Job, p)
		require.NoError(t, err)
		assert.Equal(t, want, msgs[i])
	}
	_, err = StartMessages(Payload{BotID: "bot_1"})
	assert.Error(t, err)
}
