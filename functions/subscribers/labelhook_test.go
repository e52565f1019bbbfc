package subscribers

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hookCalls records what a LabelHook was told, failing when told to.
type hookCalls struct {
	mu   sync.Mutex
	got  []LabelAddition
	fail error
}

func (h *hookCalls) LabelsAdded(ctx context.Context, bot string, a LabelAddition) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	h.got = append(h.got, a)
	return h.fail
}

func (h *hookCalls) take() []LabelAddition {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.got
	h.got = nil
	return out
}

// The routes report the labels they add, once each change is stored, with the revision that
// added them: not labels the subscriber had, not other changes, and never what the
// Service's methods (the conversation runtime's) add. A hook that fails does not fail the
// request: the change is stored, and the failure is logged.
func TestRoutesReportAddedLabels(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	hook := &hookCalls{}
	var log bytes.Buffer
	s.svc = s.svc.WithLabelHook(hook, slog.New(slog.NewJSONHandler(&log, nil)))
	s.mux = s.rebuild(t)
	base := "/api/bots/" + s.bot
	vip, gold := s.label(t, "VIP"), s.label(t, "Gold")

	res := s.do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","labels":["`+vip.ID+`"]}`)
	require.Equal(t, 201, res.Code, res.Body.String())
	sub := res.json["id"].(string)
	assert.Equal(t, []LabelAddition{{SubscriberID: sub, Channel: "telegram", LabelIDs: []string{vip.ID}, Revision: 1}}, hook.take())

	// An upsert with a label the subscriber has and one it has not reports the new one.
	res = s.do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","labels":["`+vip.ID+`","`+gold.ID+`"]}`)
	require.Equal(t, 200, res.Code, res.Body.String())
	assert.Equal(t, []LabelAddition{{SubscriberID: sub, Channel: "telegram", LabelIDs: []string{gold.ID}, Revision: 2}}, hook.take())
	res = s.do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","first_name":"Ann","labels":["`+gold.ID+`"]}`)
	require.Equal(t, 200, res.Code, res.Body.String())
	assert.Empty(t, hook.take(), "a change that adds no label")

	// The label route: added once; adding it again (a retried request) reports nothing.
	res = s.do(t, "DELETE", base+"/subscribers/"+sub+"/labels/"+vip.ID, "")
	require.Equal(t, 200, res.Code, res.Body.String())
	for range 2 {
		res = s.do(t, "POST", base+"/subscribers/"+sub+"/labels", `{"label_id":"`+vip.ID+`"}`)
		require.Equal(t, 200, res.Code, res.Body.String())
	}
	assert.Equal(t, []LabelAddition{{SubscriberID: sub, Channel: "telegram", LabelIDs: []string{vip.ID}, Revision: 5}}, hook.take())
	assert.EqualValues(t, 5, res.json["revision"])

	// The Service's methods, which the conversation runtime uses, tell nobody.
	_, err := s.svc.RemoveLabel(t.Context(), s.bot, sub, vip.ID)
	require.NoError(t, err)
	_, err = s.svc.AddLabel(t.Context(), s.bot, sub, vip.ID)
	require.NoError(t, err)
	_, _, err = s.svc.Upsert(t.Context(), s.bot, "telegram", "43", Changes{AddLabels: []string{vip.ID}})
	require.NoError(t, err)
	assert.Empty(t, hook.take())

	// A failing hook: the label is added all the same, and the failure is logged.
	hook.fail = errors.New("queue unavailable")
	res = s.do(t, "POST", base+"/subscribers", `{"channel":"vk","external_id":"7","labels":["`+vip.ID+`"]}`)
	require.Equal(t, 201, res.Code, res.Body.String())
	assert.Equal(t, []any{vip.ID}, res.json["labels"])
	assert.Len(t, hook.take(), 1)
	assert.Contains(t, log.String(), `"level":"ERROR"`)
	assert.Contains(t, log.String(), "queue unavailable")
	assert.Contains(t, log.String(), res.Header().Get("X-Request-Id"))
}
