package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/ai"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)

// scriptedAI answers the texts it is given, in order, as the managed AI family would.
type scriptedAI struct {
	mu    sync.Mutex
	texts []string
	keys  []string
	err   error
}

func (a *scriptedAI) Respond(_ context.Context, _, key string, req ai.ResponseRequest, _ func(string) error) (ai.Response, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := req.Validate(); err != nil {
		return ai.Response{}, false, err
	}
	a.keys = append(a.keys, key)
	if a.err != nil {
		return ai.Response{}, false, a.err
	}
	text := a.texts[0]
	a.texts = a.texts[1:]
	return ai.Response{ID: ids.New("air"), Provider: "openai", Model: "gpt-fake", Billing: ai.BillingManaged, OutputText: text,
		Usage: ai.Usage{InputTokens: 100, OutputTokens: 20, Cost: ai.Cost{Currency: "USD", Nanos: 1500}}}, false, nil
}

// vocab is a fixed vocabulary: one label, one number field.
type vocab struct{}

func (vocab) Labels(context.Context, string) ([]reactions.Label, error) {
	return []reactions.Label{{ID: "lbl_vip", Name: "VIP"}}, nil
}

func (vocab) Fields(context.Context, string) ([]reactions.Field, error) {
	return []reactions.Field{{ID: "fld_age", Name: "age", Type: reactions.FieldNumber}}, nil
}

func (vocab) EnsureLabels(context.Context, string, []string) (map[string]string, error) {
	return nil, errors.New("not here")
}

func (vocab) EnsureFields(context.Context, string, []reactions.Field) (map[string]string, error) {
	return nil, errors.New("not here")
}

// bots is a directory of accounts' bots.
type bots map[string][]string

func (b bots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if !slices.Contains(b[account], bot) {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

func (b bots) Owns(_ context.Context, account, bot string) (bool, error) {
	return slices.Contains(b[account], bot), nil
}

func (b bots) BotIDs(_ context.Context, account string) ([]string, error) { return b[account], nil }

type fixture struct {
	svc   *Service
	rx    *reactions.Service
	ai    *scriptedAI
	st    store.Store
	bot   string
	owner *auth.Principal
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	var mu sync.Mutex
	tick := t0
	now := func() time.Time { // a clock that moves a millisecond a reading: ids keep their order
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Millisecond)
		return tick
	}
	// The store's clock is the service's, as on a deployment: items expire on it.
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return tick }))
	f := &fixture{st: st, ai: &scriptedAI{}, bot: ids.At("bot", t0)}
	f.rx = reactions.NewService(st, vocab{}, now, slog.New(slog.DiscardHandler))
	f.svc = New(Config{Store: st, Reactions: f.rx, Vocabulary: vocab{}, Bots: bots{"acct_a": {f.bot}}, AI: f.ai, Now: now})
	f.owner = &auth.Principal{AccountID: "acct_a", Kind: auth.KindPAT, Role: auth.RoleOwner, Scopes: auth.Scopes{"*"},
		Entitlements: auth.Entitlements{Rollout: []auth.Feature{auth.RolloutCopilot}}}
	return f
}

func steps(js string) []reactions.Step {
	var out []reactions.Step
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		panic(err)
	}
	return out
}

func (f *fixture) reaction(t *testing.T) reactions.Reaction {
	t.Helper()
	rx, err := f.rx.Create(context.Background(), f.bot, reactions.Content{Name: "Welcome", Trigger: reactions.Trigger{Type: reactions.TriggerStart},
		Steps: steps(`[{"id": "hi", "type": "send_text", "text": "Hello"}, {"id": "bye", "type": "send_text", "text": "Bye"}]`)})
	require.NoError(t, err)
	return rx
}

const goodAnswer = "```json\n" + `{"summary": "Greets VIPs apart.", "steps": [
  {"id": "vip", "type": "condition", "conditions": [{"label_id": "lbl_vip", "op": "has"}], "then": "hi_vip", "else": "hi"},
  {"id": "hi_vip", "type": "send_text", "text": "Welcome back, VIP"},
  {"id": "hi", "type": "send_text", "text": "Hello there"}]}` + "\n```"

func TestDiff(t *testing.T) {
	t.Parallel()
	base := reactions.Content{Name: "A", Trigger: reactions.Trigger{Type: reactions.TriggerStart},
		Steps: steps(`[{"id": "a", "type": "send_text", "text": "1"}, {"id": "b", "type": "send_text", "text": "2"}, {"id": "c", "type": "end"}]`)}
	proposed := reactions.Content{Name: "B", Trigger: reactions.Trigger{Type: reactions.TriggerStart},
		Steps: steps(`[{"id": "b", "type": "send_text", "text": "two"}, {"id": "a", "type": "send_text", "text": "1"}, {"id": "n", "type": "end"}]`)}
	d := diff(base, proposed)
	assert.Equal(t, &Change[string]{Before: "A", After: "B"}, d.Name)
	assert.Nil(t, d.Trigger)
	assert.True(t, d.OrderChanged)
	assert.Equal(t, DiffCounts{Added: 1, Removed: 1, Changed: 1, Unchanged: 1}, d.Counts)
	assert.Equal(t, []string{"a", "b", "c"}, d.BaseOrder)
	require.Len(t, d.Steps, 3)
	assert.Equal(t, "b", d.Steps[0].StepID)
	assert.Equal(t, StepChanged, d.Steps[0].Change)
	assert.Equal(t, "2", d.Steps[0].Before.Text)
	assert.Equal(t, "two", d.Steps[0].After.Text)
	assert.Equal(t, 1, *d.Steps[0].BeforeIndex)
	assert.Equal(t, 0, *d.Steps[0].AfterIndex)
	assert.Equal(t, StepAdded, d.Steps[1].Change)
	assert.Nil(t, d.Steps[1].Before)
	assert.Equal(t, StepRemoved, d.Steps[2].Change)
	assert.Equal(t, "c", d.Steps[2].StepID)
	assert.Nil(t, d.Steps[2].AfterIndex)

	// The base is rebuilt from the diff and the proposal.
	pr := Proposal{Draft: proposed, Diff: d}
	assert.True(t, sameJSON(base, pr.base()))

	same := diff(base, base)
	assert.Equal(t, DiffCounts{Unchanged: 3}, same.Counts)
	assert.Empty(t, same.Steps)
	assert.False(t, same.OrderChanged)
	assert.Nil(t, same.Name)
}

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	base := reactions.Content{Name: "A", Trigger: reactions.Trigger{Type: reactions.TriggerStart}, Steps: steps(`[{"id": "a", "type": "end"}]`)}
	for _, tc := range []struct {
		name, text string
		ok         bool
		steps      int
		newName    string
	}{
		{"plain", `{"summary": "s", "steps": [{"id": "x", "type": "end"}]}`, true, 1, "A"},
		{"fenced json", "```json\n{\"summary\": \"s\", \"name\": \"B\", \"steps\": []}\n```", true, 0, "B"},
		{"bare fence", "  ```\n{\"summary\": \"s\", \"steps\": [{\"id\": \"x\", \"type\": \"end\"}]}\n```\n", true, 1, "A"},
		{"prose", "Sure! Here is the flow: {}", false, 0, ""},
		{"garbage", "echo: make it better", false, 0, ""},
		{"trailing prose", `{"summary": "s", "steps": []} hope this helps`, false, 0, ""},
		{"unknown member", `{"summary": "s", "steps": [], "notes": "x"}`, false, 0, ""},
		{"no summary", `{"steps": []}`, false, 0, ""},
		{"no steps", `{"summary": "s"}`, false, 0, ""},
		{"unknown step member", `{"summary": "s", "steps": [{"id": "x", "type": "end", "color": "red"}]}`, false, 0, ""},
		{"bad step shape", `{"summary": "s", "steps": [{"id": "x", "type": "send_text"}]}`, false, 0, ""},
		{"other fence", "```yaml\nsummary: s\n```", false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			summary, c, err := parseAnswer(tc.text, base, "rct_x")
			if !tc.ok {
				e := httpapi.AsError(err)
				require.NotNil(t, err)
				assert.Equal(t, "copilot_unusable_answer", e.Code)
				assert.Equal(t, 502, e.Status())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "s", summary)
			assert.Len(t, c.Steps, tc.steps)
			assert.Equal(t, tc.newName, c.Name)
			assert.Equal(t, reactions.TriggerStart, c.Trigger.Type)
		})
	}
}

func TestCreateValidateSimulateApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rx := f.reaction(t)
	f.ai.texts = []string{goodAnswer}
	pr, err := f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: "Greet VIPs differently"})
	require.NoError(t, err)
	assert.Equal(t, []string{"copilot:" + pr.ID}, f.ai.keys, "metered under the proposal's key")
	assert.Equal(t, StatusOpen, pr.Status)
	assert.Equal(t, rx.Revision, pr.BaseRevision)
	assert.Equal(t, "balanced", pr.Profile)
	assert.Equal(t, int64(100), pr.Usage.InputTokens)
	assert.Equal(t, DiffCounts{Added: 2, Removed: 1, Changed: 1}, pr.Diff.Counts)

	got, err := f.svc.Get(ctx, f.owner, pr.ID)
	require.NoError(t, err)
	assert.Equal(t, pr, got)

	v, err := f.svc.Validate(ctx, f.owner, pr.ID)
	require.NoError(t, err)
	assert.True(t, v.Valid, "%v", v.Problems)

	req := SimulateRequest{Samples: []Sample{{}, {}}}
	json.Unmarshal([]byte(`{"samples": [{"subscriber": {"labels": ["lbl_vip"], "fields": {}}}, {"subscriber": {"labels": [], "fields": {}}}]}`), &req) //nolint:errcheck
	a, err := f.svc.Simulate(ctx, f.owner, pr.ID, req)
	require.NoError(t, err)
	b, err := f.svc.Simulate(ctx, f.owner, pr.ID, req)
	require.NoError(t, err)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	assert.JSONEq(t, string(ja), string(jb))
	assert.Equal(t, string(ja), string(jb), "deterministic")
	assert.Equal(t, []string{"vip", "hi_vip", "hi"}, a.Samples[0].Proposed.Path)
	assert.Equal(t, []string{"vip", "hi"}, a.Samples[1].Proposed.Path)
	assert.Equal(t, []string{"hi", "bye"}, a.Samples[0].Base.Path)
	assert.Equal(t, 2, a.PathChanged)

	applied, err := f.svc.Apply(ctx, f.owner, pr.ID, nil)
	require.NoError(t, err)
	assert.Equal(t, StatusApplied, applied.Proposal.Status)
	assert.Equal(t, rx.Revision+1, applied.Reaction.Revision)
	assert.Nil(t, applied.Reaction.PublishedVersion, "never published")
	assert.Equal(t, rx.Revision+1, *applied.Proposal.AppliedRevision)

	_, err = f.svc.Apply(ctx, f.owner, pr.ID, nil)
	assert.Equal(t, "proposal_not_open", httpapi.AsError(err).Code)
	_, err = f.svc.Reject(ctx, f.owner, pr.ID, nil)
	assert.Equal(t, "proposal_not_open", httpapi.AsError(err).Code)
}

func TestApplyStale(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rx := f.reaction(t)
	f.ai.texts = []string{goodAnswer, goodAnswer}
	stale, err := f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: "one"})
	require.NoError(t, err)
	other, err := f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: "two"})
	require.NoError(t, err)

	name := "Renamed"
	_, err = f.rx.Update(ctx, f.bot, rx.ID, rx.Revision, reactions.Patch{Name: &name})
	require.NoError(t, err)

	_, err = f.svc.Apply(ctx, f.owner, stale.ID, nil)
	e := httpapi.AsError(err)
	assert.Equal(t, 409, e.Status())
	assert.Equal(t, "proposal_stale", e.Code)
	assert.Equal(t, rx.Revision, e.Extensions["base_revision"])
	got, err := f.svc.Get(ctx, f.owner, stale.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusSuperseded, got.Status)

	// A wrong expected_revision is 409 stale_revision, before anything else.
	wrong := int64(7)
	_, err = f.svc.Reject(ctx, f.owner, other.ID, &wrong)
	assert.Equal(t, "stale_revision", httpapi.AsError(err).Code)
	rej, err := f.svc.Reject(ctx, f.owner, other.ID, &other.Revision)
	require.NoError(t, err)
	assert.Equal(t, StatusRejected, rej.Status)

	list, next, err := f.svc.List(ctx, f.owner, rx.ID, 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, list, 2)
	assert.Equal(t, other.ID, list[0].ID, "newest first")
}

func TestCreateFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rx := f.reaction(t)

	f.ai.texts = []string{"echo: nothing useful"}
	_, err := f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: "x"})
	assert.Equal(t, "copilot_unusable_answer", httpapi.AsError(err).Code)
	list, _, err := f.svc.List(ctx, f.owner, rx.ID, 10, "")
	require.NoError(t, err)
	assert.Empty(t, list, "nothing stored")

	f.ai.err = httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "down")
	_, err = f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: "x"})
	assert.Equal(t, "provider_unavailable", httpapi.AsError(err).Code)

	_, err = f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: " "})
	assert.Equal(t, "validation_failed", httpapi.AsError(err).Code)

	// Another account's reaction, a missing one: 404, before the model is asked.
	stranger := *f.owner
	stranger.AccountID = "acct_b"
	_, err = f.svc.Create(ctx, &stranger, rx.ID, CreateRequest{Goal: "x"})
	assert.Equal(t, 404, httpapi.AsError(err).Status())
	_, err = f.svc.Create(ctx, f.owner, ids.At("rct", t0), CreateRequest{Goal: "x"})
	assert.Equal(t, 404, httpapi.AsError(err).Status())

	// A member without the Reactions right on the bot: 403 missing_right.
	member := *f.owner
	member.Role, member.Rights = auth.RoleMember, 0
	_, err = f.svc.Create(ctx, &member, rx.ID, CreateRequest{Goal: "x"})
	assert.Equal(t, "missing_right", httpapi.AsError(err).Code)
}

func TestValidateReportsPublishProblems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rx := f.reaction(t)
	f.ai.texts = []string{`{"summary": "s", "steps": [{"id": "x", "type": "add_label", "label_id": "lbl_gone"}]}`, `{"summary": "s", "steps": []}`}
	pr, err := f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: "x"})
	require.NoError(t, err)
	v, err := f.svc.Validate(ctx, f.owner, pr.ID)
	require.NoError(t, err)
	assert.False(t, v.Valid)
	require.Len(t, v.Problems, 1)
	assert.Equal(t, "steps[0].label_id", v.Problems[0].Field)
	got, err := f.svc.Get(ctx, f.owner, pr.ID)
	require.NoError(t, err)
	assert.Equal(t, &v, got.LastValidation)

	empty, err := f.svc.Create(ctx, f.owner, rx.ID, CreateRequest{Goal: "x"})
	require.NoError(t, err)
	v, err = f.svc.Validate(ctx, f.owner, empty.ID)
	require.NoError(t, err)
	assert.Equal(t, []httpapi.FieldError{{Field: "steps", Message: "a reaction needs at least one step to be published"}}, v.Problems)
}

// Under an Idempotency-Key a create is made once: the same key with the same reaction and
// body replays the proposal without asking the model again; another body is 422; the managed
// AI call goes under a key derived from it (so that a retry after a failure replays what the
// provider already answered); a caller without the Reactions right gets no replay; keys are
// per account, and a malformed one is 400.
func TestCreateOnceUnderAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rx := f.reaction(t)
	f.ai.texts = []string{goodAnswer, goodAnswer}
	req := CreateRequest{Goal: "Greet VIPs differently"}

	first, replayed, err := f.svc.CreateOnce(ctx, f.owner, rx.ID, "k-1", req)
	require.NoError(t, err)
	assert.False(t, replayed)
	again, replayed, err := f.svc.CreateOnce(ctx, f.owner, rx.ID, "k-1", CreateRequest{Goal: " Greet VIPs differently ", Profile: "balanced"})
	require.NoError(t, err)
	assert.True(t, replayed, "the same request, its defaults spelled out")
	assert.Equal(t, first, again)
	require.Len(t, f.ai.keys, 1, "the model was asked once")
	assert.True(t, strings.HasPrefix(f.ai.keys[0], "copilot-key:"), f.ai.keys[0])
	assert.NotContains(t, f.ai.keys[0], "k-1", "derived, not the client's key itself")

	_, _, err = f.svc.CreateOnce(ctx, f.owner, rx.ID, "k-1", CreateRequest{Goal: "Something else"})
	assert.Equal(t, "idempotency_key_reused", httpapi.AsError(err).Code)
	member := *f.owner
	member.Role, member.Rights = auth.RoleMember, 0
	_, _, err = f.svc.CreateOnce(ctx, &member, rx.ID, "k-1", req)
	assert.Equal(t, "missing_right", httpapi.AsError(err).Code)
	_, _, err = f.svc.CreateOnce(ctx, f.owner, rx.ID, "with space", req)
	assert.Equal(t, "invalid_idempotency_key", httpapi.AsError(err).Code)

	other, replayed, err := f.svc.CreateOnce(ctx, f.owner, rx.ID, "k-2", req)
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.NotEqual(t, first.ID, other.ID, "another key, another proposal")
	list, _, err := f.svc.List(ctx, f.owner, rx.ID, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 2)
}
