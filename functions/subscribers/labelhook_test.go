package subscribers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// hookCalls is a LabelHook that writes one marker item per label addition (as the platform
// writes an outbox item) and records what it was asked and what committed.
type hookCalls struct {
	mu        sync.Mutex
	asked     []LabelAddition
	committed []LabelAddition
	fail      error
	// cond conditions the marker writes (Always by default); MustExist fails them.
	cond store.Condition
}

func markerKey(a LabelAddition, label string) store.Key {
	return store.Key{PK: "HOOK", SK: fmt.Sprintf("%s.%d.%s", a.SubscriberID, a.Revision, label)}
}

func (h *hookCalls) LabelsAdded(ctx context.Context, bot string, a LabelAddition) ([]store.Write, func(context.Context), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, a)
	if h.fail != nil {
		return nil, nil, h.fail
	}
	var writes []store.Write
	for _, l := range a.LabelIDs {
		writes = append(writes, store.PutOp(store.Item{Key: markerKey(a, l), Revision: 1}, h.cond))
	}
	return writes, func(context.Context) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.committed = append(h.committed, a)
	}, nil
}

// take returns the additions that committed, and forgets them and what was asked.
func (h *hookCalls) take() []LabelAddition {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.committed
	h.committed, h.asked = nil, nil
	return out
}

// The routes' changes that add labels carry the hook's writes, with the revision that adds
// them: not for labels the subscriber had, not for other changes, and never for what the
// Service's methods (the conversation runtime's) add. The hook's function runs once the
// change has committed.
func TestRoutesCarryTheLabelHooksWrites(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	hook := &hookCalls{}
	s.svc = s.svc.WithLabelHook(hook)
	s.serve(t)
	base := "/api/bots/" + s.bot
	vip, gold := s.label(t, "VIP"), s.label(t, "Gold")
	marked := func(a LabelAddition, label string) bool {
		_, err := s.store.Get(t.Context(), markerKey(a, label))
		return err == nil
	}

	res := s.Do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","labels":["`+vip.ID+`"]}`)
	require.Equal(t, 201, res.Code, res.Body)
	sub := res.JSON["id"].(string)
	first := LabelAddition{SubscriberID: sub, Channel: "telegram", LabelIDs: []string{vip.ID}, Revision: 1}
	assert.Equal(t, []LabelAddition{first}, hook.take())
	assert.True(t, marked(first, vip.ID), "written with the subscriber")

	// An upsert with a label the subscriber has and one it has not adds the new one.
	res = s.Do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","labels":["`+vip.ID+`","`+gold.ID+`"]}`)
	require.Equal(t, 200, res.Code, res.Body)
	second := LabelAddition{SubscriberID: sub, Channel: "telegram", LabelIDs: []string{gold.ID}, Revision: 2}
	assert.Equal(t, []LabelAddition{second}, hook.take())
	assert.True(t, marked(second, gold.ID))
	res = s.Do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","first_name":"Ann","labels":["`+gold.ID+`"]}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Empty(t, hook.take(), "a change that adds no label")

	// The label route: added once; adding it again (a retried request) adds nothing.
	res = s.Do(t, "DELETE", base+"/subscribers/"+sub+"/labels/"+vip.ID, "")
	require.Equal(t, 200, res.Code, res.Body)
	for range 2 {
		res = s.Do(t, "POST", base+"/subscribers/"+sub+"/labels", `{"label_id":"`+vip.ID+`"}`)
		require.Equal(t, 200, res.Code, res.Body)
	}
	assert.Equal(t, []LabelAddition{{SubscriberID: sub, Channel: "telegram", LabelIDs: []string{vip.ID}, Revision: 5}}, hook.take())
	assert.EqualValues(t, 5, res.JSON["revision"])

	// The Service's methods, which the conversation runtime uses, consult nobody.
	_, err := s.svc.RemoveLabel(t.Context(), s.bot, sub, vip.ID)
	require.NoError(t, err)
	_, err = s.svc.AddLabel(t.Context(), s.bot, sub, vip.ID)
	require.NoError(t, err)
	_, _, err = s.svc.Upsert(t.Context(), s.bot, "telegram", "43", Changes{AddLabels: []string{vip.ID}})
	require.NoError(t, err)
	hook.mu.Lock()
	assert.Empty(t, hook.asked)
	hook.mu.Unlock()
	assert.Empty(t, hook.take())
}

// The labels and what the hook writes commit together or not at all: a hook that fails, or
// whose write cannot be made, fails the request and stores nothing.
func TestLabelHookFailureStoresNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		hook *hookCalls
	}{
		{"the hook fails", &hookCalls{fail: errors.New("outbox unavailable")}},
		{"its write fails", &hookCalls{cond: store.MustExist}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.svc = s.svc.WithLabelHook(c.hook)
			s.serve(t)
			base := "/api/bots/" + s.bot
			vip := s.label(t, "VIP")

			res := s.Do(t, "POST", base+"/subscribers", `{"channel":"vk","external_id":"7","labels":["`+vip.ID+`"]}`)
			assert.Equal(t, 500, res.Code, res.Body)
			subs, _, err := s.svc.List(t.Context(), s.bot, Filter{}, 10, "")
			require.NoError(t, err)
			assert.Empty(t, subs, "the subscriber was not stored")

			sub, _, err := s.svc.Upsert(t.Context(), s.bot, "vk", "7", Changes{})
			require.NoError(t, err)
			res = s.Do(t, "POST", base+"/subscribers/"+sub.ID+"/labels", `{"label_id":"`+vip.ID+`"}`)
			assert.Equal(t, 500, res.Code, res.Body)
			got, err := s.svc.Get(t.Context(), s.bot, sub.ID)
			require.NoError(t, err)
			assert.Empty(t, got.Labels, "the label was not added")
			members, _, err := s.svc.List(t.Context(), s.bot, Filter{Label: vip.ID}, 10, "")
			require.NoError(t, err)
			assert.Empty(t, members)
			assert.Empty(t, c.hook.take(), "nothing committed")
		})
	}
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

// The largest change a route can make, with the hook's write: a subscriber renamed from
// MaxNameWords words to as many others, given MaxLabelsPerChange labels (a check and a
// membership each) and MaxFieldsPerChange field values (a check each), and the one outbox
// item the platform's hook writes for all its labels. It fits store.MaxTransactWrites.
func TestLargestHookedChangeFitsOneTransaction(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sizes := &transactSizes{Store: s.store}
	hook := &oneWriteHook{}
	s.svc = NewService(sizes, s.clock.Now, nil).WithLabelHook(hook)
	s.serve(t)
	var labels []string
	for i := range MaxLabelsPerChange {
		labels = append(labels, `"`+s.label(t, fmt.Sprint("L", i)).ID+`"`)
	}
	fields := map[string]any{}
	for i := range MaxFieldsPerChange {
		name := fmt.Sprint("f", i)
		s.field(t, name, TypeString)
		fields[name] = "x"
	}
	words := func(prefix string) string {
		var w []string
		for i := range MaxNameWords {
			w = append(w, fmt.Sprintf("%s%d", prefix, i))
		}
		return strings.Join(w, " ")
	}
	res := s.Do(t, "POST", "/api/bots/"+s.bot+"/subscribers", `{"channel":"telegram","external_id":"1","first_name":"`+words("a")+`"}`)
	require.Equal(t, 201, res.Code, res.Body)
	body, err := json.Marshal(fields)
	require.NoError(t, err)
	sizes.mu.Lock()
	sizes.sizes = nil
	sizes.mu.Unlock()
	res = s.Do(t, "POST", "/api/bots/"+s.bot+"/subscribers", `{"channel":"telegram","external_id":"1","first_name":"`+words("b")+
		`","labels":[`+strings.Join(labels, ",")+`],"fields":`+string(body)+`}`)
	require.Equal(t, 200, res.Code, res.Body)
	want := 1 + 2*MaxNameWords + 2*MaxLabelsPerChange + MaxFieldsPerChange + 1
	sizes.mu.Lock()
	assert.Contains(t, sizes.sizes, want, "the change's transaction")
	assert.LessOrEqual(t, slices.Max(sizes.sizes), store.MaxTransactWrites)
	sizes.mu.Unlock()
	assert.Equal(t, 1, hook.calls)
}

// oneWriteHook writes one item per addition, as the platform's outbox does for any number of
// labels.
type oneWriteHook struct{ calls int }

func (h *oneWriteHook) LabelsAdded(_ context.Context, _ string, a LabelAddition) ([]store.Write, func(context.Context), error) {
	h.calls++
	return []store.Write{store.PutOp(store.Item{Key: markerKey(a, "all"), Revision: 1}, store.MustNotExist)}, nil, nil
}
