package playbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// fakeKind is one kind of resource in memory; failOn makes the create of that name fail.
type fakeKind struct {
	mu      sync.Mutex
	prefix  string
	clock   func() time.Time
	items   map[string]map[string]*fakeItem // bot -> id -> item
	failOn  string
	deleted []string
	// noUpdate makes Update refuse, as the adapters of every kind but reactions do.
	noUpdate bool
	// deletes, when set, records every delete of every kind, in order.
	deletes *deleteLog
	// before, when set, runs at the start of every Create and Update with the operation
	// ("create", or "update" and the id): a test's way to act, or to wait, mid-operation.
	before func(op, id string)
}

// deleteLog is the order of deletes across kinds.
type deleteLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *deleteLog) add(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
}

type fakeItem struct {
	Existing
	spec json.RawMessage
}

func newFakeKind(prefix string, clock func() time.Time) *fakeKind {
	return &fakeKind{prefix: prefix, clock: clock, items: map[string]map[string]*fakeItem{}}
}

func (k *fakeKind) List(_ context.Context, bot string) ([]Existing, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Existing
	for _, it := range k.items[bot] {
		out = append(out, it.Existing)
	}
	return out, nil
}

func (k *fakeKind) Get(_ context.Context, bot, id string) (Existing, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	it, ok := k.items[bot][id]
	if !ok {
		return Existing{}, ErrGone
	}
	return it.Existing, nil
}

func (k *fakeKind) put(bot, id string, spec json.RawMessage) Existing {
	var named struct{ Name string }
	_ = json.Unmarshal(spec, &named)
	if k.items[bot] == nil {
		k.items[bot] = map[string]*fakeItem{}
	}
	at := k.clock()
	if old, ok := k.items[bot][id]; ok {
		at = old.CreatedAt
	}
	it := &fakeItem{Existing: Existing{ID: id, Name: named.Name, CreatedAt: at.UTC().Truncate(time.Second), Fingerprint: Fingerprint(json.RawMessage(spec))}, spec: spec}
	k.items[bot][id] = it
	return it.Existing
}

func (k *fakeKind) Create(_ context.Context, bot string, spec json.RawMessage) (Existing, error) {
	if k.before != nil {
		k.before("create", "")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var named struct{ Name string }
	_ = json.Unmarshal(spec, &named)
	if named.Name == k.failOn {
		return Existing{}, httpapi.E(httpapi.KindConflict, "limit_reached", "injected failure")
	}
	return k.put(bot, ids.At(k.prefix, k.clock()), spec), nil
}

func (k *fakeKind) Update(_ context.Context, bot, id string, spec json.RawMessage) (Existing, error) {
	if k.before != nil {
		k.before("update", id)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.noUpdate {
		return Existing{}, ErrUnsupported
	}
	if _, ok := k.items[bot][id]; !ok {
		return Existing{}, ErrGone
	}
	return k.put(bot, id, spec), nil
}

func (k *fakeKind) Delete(_ context.Context, bot, id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.items[bot], id)
	k.deleted = append(k.deleted, id)
	if k.deletes != nil {
		k.deletes.add(id)
	}
	return nil
}

func (k *fakeKind) count(bot string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.items[bot])
}

type fakeChannels map[string][]string

func (f fakeChannels) Kinds(_ context.Context, bot string) ([]string, error) { return f[bot], nil }

// bots is the tenancy check: bot belongs to account.
type bots map[string]string

func (b bots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if b[bot] != account {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

type fixture struct {
	svc     *Service
	deletes *deleteLog
	clock   *httpapitest.Clock
	kinds   map[string]*fakeKind
	events  *eventlogtest.Memory
	p       *auth.Principal
	bot     string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := httpapitest.NewClock(t0, time.Millisecond)
	f := &fixture{clock: clock, kinds: map[string]*fakeKind{}, events: eventlogtest.NewMemory(), bot: ids.At("bot", t0), deletes: &deleteLog{}}
	kinds := map[string]Kind{}
	for kind, prefix := range map[string]string{catalog.KindLabel: "lbl", catalog.KindField: "fld", catalog.KindContent: "doc",
		catalog.KindPopup: "pop", catalog.KindCollection: "col", catalog.KindReaction: "rct"} {
		f.kinds[kind] = newFakeKind(prefix, clock.Now)
		f.kinds[kind].noUpdate = kind != catalog.KindReaction
		f.kinds[kind].deletes = f.deletes
		kinds[kind] = f.kinds[kind]
	}
	account := ids.At("acct", t0)
	f.p = &auth.Principal{AccountID: account, Kind: auth.KindPAT, Role: auth.RoleOwner, Scopes: auth.Scopes{"*"},
		Entitlements: auth.Entitlements{Rollout: []auth.Feature{auth.RolloutPlaybooks}}}
	f.svc = New(Config{Store: sqlitetest.Open(t), Kinds: kinds, Channels: fakeChannels{f.bot: {"telegram"}},
		Bots: bots{f.bot: account}, Events: f.events, Now: clock.Now})
	return f
}

func rev(n int64) *int64 { return &n }

func answers(t *testing.T, m map[string]any) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for k, v := range m {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out[k] = b
	}
	return out
}

// ready creates an install of abandoned_cart at version and answers its required questions.
func (f *fixture) ready(t *testing.T, version int) Install {
	t.Helper()
	ctx := context.Background()
	in, err := f.svc.Create(ctx, f.p, CreateRequest{BotID: f.bot, PlaybookID: "abandoned_cart", Version: version})
	require.NoError(t, err)
	given := map[string]any{"store_name": "Acme"}
	if version >= 3 {
		given["website"] = "https://acme.example"
	}
	in, err = f.svc.Answer(ctx, f.p, in.ID, PatchRequest{Answers: answers(t, given), ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	return in
}

func TestAnswersAreResumableAndChecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in, err := f.svc.Create(ctx, f.p, CreateRequest{BotID: f.bot, PlaybookID: "abandoned_cart"})
	require.NoError(t, err)
	assert.Equal(t, 3, in.Version, "the newest version by default")
	assert.Equal(t, StatusSetup, in.Status)
	require.Len(t, in.Questions, 6)
	assert.False(t, in.Questions[0].Answered)

	in, err = f.svc.Answer(ctx, f.p, in.ID, PatchRequest{Answers: answers(t, map[string]any{"store_name": " Acme "}), ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	in, err = f.svc.Answer(ctx, f.p, in.ID, PatchRequest{Answers: answers(t, map[string]any{"cart_keyword": "basket"}), ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"store_name": "Acme", "cart_keyword": "basket"}, in.Answers, "answers merge")
	assert.True(t, in.Questions[0].Answered)
	assert.Equal(t, int64(3), in.Revision)
	in, err = f.svc.Answer(ctx, f.p, in.ID, PatchRequest{Answers: answers(t, map[string]any{"website": " HTTPS://Shop.Example:443/ "}), ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	assert.Equal(t, "https://shop.example", in.Answers["website"], "a website is saved as its origin")

	for _, tc := range []struct {
		answers map[string]any
		field   string
	}{
		{map[string]any{"nope": "x"}, "answers.nope"},
		{map[string]any{"offer_discount": "yes"}, "answers.offer_discount"},
		{map[string]any{"store_name": 3}, "answers.store_name"},
		{map[string]any{"website": "shop.example"}, "answers.website"},
		{map[string]any{"website": "https://shop.example/cart"}, "answers.website"},
	} {
		_, err := f.svc.Answer(ctx, f.p, in.ID, PatchRequest{Answers: answers(t, tc.answers), ExpectedRevision: &in.Revision})
		var he *httpapi.Error
		require.ErrorAs(t, err, &he)
		assert.Equal(t, httpapi.KindInvalid, he.Kind)
		assert.Equal(t, tc.field, he.Extensions["errors"].([]httpapi.FieldError)[0].Field)
	}
	_, err = f.svc.Answer(ctx, f.p, in.ID, PatchRequest{Answers: answers(t, map[string]any{"cart_keyword": "x"}), ExpectedRevision: rev(1)})
	assert.Equal(t, "stale_revision", httpapi.AsError(err).Code)
}

func TestPreflightReportsConflictsAndMissing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in, err := f.svc.Create(ctx, f.p, CreateRequest{BotID: f.bot, PlaybookID: "abandoned_cart", Version: 1})
	require.NoError(t, err)
	f.kinds[catalog.KindLabel].put(f.bot, "lbl_customer", json.RawMessage(`{"name": "cart ABANDONED"}`))

	plan, err := f.svc.Preflight(ctx, f.p, in.ID)
	require.NoError(t, err)
	assert.False(t, plan.Ready)
	assert.Equal(t, []string{"store_name"}, plan.MissingAnswers)
	assert.Equal(t, []Conflict{{Kind: "label", Key: "cart_abandoned", Name: "Cart abandoned", ExistingID: "lbl_customer"}}, plan.Conflicts)
	assert.Len(t, plan.Creates, 6)
	assert.Empty(t, plan.Warnings)

	_, err = f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	he := httpapi.AsError(err)
	assert.Equal(t, "playbook_not_ready", he.Code)
	assert.Equal(t, 0, f.kinds[catalog.KindField].count(f.bot), "nothing created")

	// Without a channel of the playbook's kinds: a warning, not a blocker.
	f.svc.channels = fakeChannels{}
	plan, err = f.svc.Preflight(ctx, f.p, in.ID)
	require.NoError(t, err)
	require.Len(t, plan.Warnings, 1)
	assert.Equal(t, "missing_channel", plan.Warnings[0].Code)
}

func TestInstallRollsBackAFailedCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.ready(t, 1)
	f.kinds[catalog.KindReaction].failOn = "Abandoned cart: reminder" // the last create

	_, err := f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	he := httpapi.AsError(err)
	require.NotNil(t, he)
	assert.Equal(t, "install_failed", he.Code)
	assert.Equal(t, "limit_reached", he.Extensions["cause"])
	for kind, k := range f.kinds {
		assert.Zero(t, k.count(f.bot), "no %s left", kind)
	}
	assert.Len(t, f.kinds[catalog.KindLabel].deleted, 2)
	assert.Len(t, f.kinds[catalog.KindReaction].deleted, 1, "the checkout reaction, created before the failure")

	got, err := f.svc.Get(ctx, f.p, in.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, got.Status)
	require.NotNil(t, got.Error)
	assert.Equal(t, "limit_reached", got.Error.Code)
	assert.Equal(t, "cart_reminder", got.Error.Resource.Key)
	for _, e := range got.Journal {
		assert.Equal(t, JournalRolledBack, e.State, "%+v", e)
	}
	assert.Len(t, got.Journal, 5)

	// Retry once the cause is gone.
	f.kinds[catalog.KindReaction].failOn = ""
	got, err = f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &got.Revision})
	require.NoError(t, err)
	assert.Equal(t, StatusInstalled, got.Status)
	require.Len(t, got.Resources, 6)
	assert.Empty(t, got.Journal)
	// The reminder's goto names the checkout reaction created before it.
	reminder := f.kinds[catalog.KindReaction].items[f.bot][got.Resources[5].ID]
	assert.Contains(t, string(reminder.spec), got.Resources[4].ID)

	_, err = f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &got.Revision})
	assert.Equal(t, "playbook_installed", httpapi.AsError(err).Code)
	assert.Equal(t, "playbook_installed", httpapi.AsError(f.svc.Delete(ctx, f.p, in.ID, nil)).Code)
}

// A process that died mid-install leaves its journal: intents with or without the
// resource. A read after DefaultStuckAfter rolls it back, deleting only what the install made.
func TestAbandonedInstallIsRecovered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.ready(t, 1)
	rec, err := f.svc.locate(ctx, f.p, botRead, in.ID)
	require.NoError(t, err)
	// A customer's label of the same name as an intent, made before the intent: kept.
	f.kinds[catalog.KindLabel].put(f.bot, "lbl_old", json.RawMessage(`{"name": "Cart recovered"}`))
	f.clock.Advance(time.Hour)
	made := f.kinds[catalog.KindLabel].put(f.bot, ids.At("lbl", f.clock.Now()), json.RawMessage(`{"name": "Cart abandoned"}`))
	now := f.clock.Now().UTC().Truncate(time.Second)
	rec.Status, rec.HeartbeatAt = StatusInstalling, &now
	rec.Journal = []JournalEntry{
		{Kind: "label", Key: "cart_abandoned", Name: "Cart abandoned", State: JournalIntent, At: now}, // created, id not recorded
		{Kind: "label", Key: "cart_recovered", Name: "Cart recovered", State: JournalIntent, At: now}, // never created
	}
	require.NoError(t, f.svc.save(ctx, &rec))

	got, err := f.svc.Get(ctx, f.p, in.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusInstalling, got.Status, "not stuck yet")

	f.clock.Advance(DefaultStuckAfter + time.Second)
	_, done, err := f.svc.RecoverStep(ctx, json.RawMessage(fmt.Sprintf(`{"bot_id": %q, "install_id": %q}`, f.bot, in.ID)), "")
	require.NoError(t, err)
	assert.True(t, done)
	got, err = f.svc.Get(ctx, f.p, in.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, got.Status)
	assert.Equal(t, "install_interrupted", got.Error.Code)
	_, err = f.kinds[catalog.KindLabel].Get(ctx, f.bot, made.ID)
	assert.ErrorIs(t, err, ErrGone, "the install's label is rolled back")
	_, err = f.kinds[catalog.KindLabel].Get(ctx, f.bot, "lbl_old")
	assert.NoError(t, err, "the customer's older label stays")
}

func TestUpgradeKeepsCustomerEdits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.ready(t, 1)
	in, err := f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	reactions := f.kinds[catalog.KindReaction]
	var reminderID, checkoutID string
	for _, r := range in.Resources {
		switch r.Key {
		case "cart_reminder":
			reminderID = r.ID
		case "cart_checkout":
			checkoutID = r.ID
		}
	}
	// The customer edits the reminder.
	_, err = reactions.Update(ctx, f.bot, reminderID, json.RawMessage(`{"name": "Abandoned cart: reminder", "steps": []}`))
	require.NoError(t, err)

	_, err = f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 1, DryRun: true})
	assert.Equal(t, "playbook_version_not_newer", httpapi.AsError(err).Code)
	_, err = f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 9, DryRun: true})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	dry, err := f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 2, DryRun: true})
	require.NoError(t, err)
	actions := map[string]string{}
	for _, d := range dry.Diff {
		actions[d.Key] = d.Action
	}
	assert.Equal(t, map[string]string{"cart_abandoned": ActionUnchanged, "cart_recovered": ActionUnchanged, "cart_code_sent": ActionUnchanged,
		"abandoned_carts": ActionUnchanged, "cart_checkout": ActionUpdate, "cart_reminder": ActionKeptCustomerEdit, "cart_help": ActionCreate}, actions)
	assert.Nil(t, dry.Install)
	assert.Equal(t, 2, reactions.count(f.bot), "a dry run changes nothing")

	up, err := f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 2, ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	require.NotNil(t, up.Install)
	assert.Equal(t, 2, up.Install.Version)
	assert.Len(t, up.Install.Resources, 7)
	assert.Contains(t, string(reactions.items[f.bot][checkoutID].spec), "Shipping is free today.", "the unedited reaction is upgraded")
	assert.JSONEq(t, `{"name": "Abandoned cart: reminder", "steps": []}`, string(reactions.items[f.bot][reminderID].spec), "the edit is kept")
	assert.Equal(t, 3, reactions.count(f.bot))
}

func TestKPIsCountTheInstallsEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.ready(t, 1)
	in, err := f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	var checkout string
	for _, r := range in.Resources {
		if r.Key == "cart_checkout" {
			checkout = r.ID
		}
	}
	day := t0.Add(24 * time.Hour)
	_, err = f.events.Append(ctx,
		eventlog.Event{ID: "e1", BotID: f.bot, SubscriberID: "sub_1", Name: eventlog.ReactionStarted, At: day, Source: eventlog.SourceRuntime, Properties: map[string]any{"reaction_id": checkout}},
		eventlog.Event{ID: "e2", BotID: f.bot, SubscriberID: "sub_1", Name: eventlog.ReactionStarted, At: day.Add(time.Hour), Source: eventlog.SourceRuntime, Properties: map[string]any{"reaction_id": "rct_other"}},
		eventlog.Event{ID: "e3", BotID: f.bot, SubscriberID: "sub_2", Name: eventlog.ReactionStarted, At: day.Add(25 * time.Hour), Source: eventlog.SourceRuntime, Properties: map[string]any{"reaction_id": checkout}},
	)
	require.NoError(t, err)
	k, err := f.svc.KPIs(ctx, f.p, in.ID, t0, t0.Add(72*time.Hour))
	require.NoError(t, err)
	require.Len(t, k.KPIs, 3)
	assert.Equal(t, "checkouts", k.KPIs[0].ID)
	assert.Equal(t, int64(2), k.KPIs[0].Value)
	assert.Equal(t, []DayValue{{"2026-03-01", 0}, {"2026-03-02", 1}, {"2026-03-03", 1}, {"2026-03-04", 0}}, k.KPIs[0].Series, "every day the range touches")
	assert.Equal(t, int64(0), k.KPIs[1].Value)

	_, _, err = ParseRange(t0, "2025-01-01", "2026-03-01")
	assert.Equal(t, "range_too_long", httpapi.AsError(err).Code)
	from, to, err := ParseRange(t0, "", "")
	require.NoError(t, err)
	assert.Equal(t, 30*24*time.Hour, to.Sub(from))
	from, to, err = ParseRange(t0, "2026-02-01", "2026-02-01")
	require.NoError(t, err)
	assert.Equal(t, 24*time.Hour, to.Sub(from), "a date as to includes the day")
}

func TestAccessOnTheInstallsBot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.ready(t, 1)
	other := *f.p
	other.AccountID = ids.At("acct", t0.Add(time.Second))
	_, err := f.svc.Get(ctx, &other, in.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "another account's install is not found")

	member := *f.p
	member.Role = auth.RoleMember
	_, err = f.svc.Get(ctx, &member, in.ID)
	assert.NoError(t, err, "reading needs no right")
	_, err = f.svc.Preflight(ctx, &member, in.ID)
	assert.Equal(t, "missing_right", httpapi.AsError(err).Code)
	_, err = f.svc.KPIs(ctx, &member, in.ID, t0, t0.Add(time.Hour))
	assert.Equal(t, "missing_right", httpapi.AsError(err).Code)
	_, err = f.svc.Create(ctx, &member, CreateRequest{BotID: f.bot, PlaybookID: "abandoned_cart"})
	assert.Equal(t, "missing_right", httpapi.AsError(err).Code)
	require.True(t, errors.Is(f.svc.Delete(ctx, f.p, in.ID, nil), nil))
	_, err = f.svc.Get(ctx, f.p, in.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
}

// Version 3 installs a content document and a popup between the fields and the
// collection: a failure at the last reaction rolls every kind back, newest first.
func TestInstallRollsBackContentAndPopups(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.ready(t, 3)
	f.kinds[catalog.KindReaction].failOn = "Abandoned cart: help" // the last create

	plan, err := f.svc.Preflight(ctx, f.p, in.ID)
	require.NoError(t, err)
	require.True(t, plan.Ready, "%+v", plan)
	assert.Empty(t, plan.Blockers)
	var order []string
	for _, c := range plan.Creates {
		order = append(order, c.Kind+"."+c.Key)
	}
	assert.Equal(t, []string{"label.cart_abandoned", "label.cart_recovered", "field.cart_code_sent", "content.cart_reminder_message",
		"popup.exit_offer", "collection.abandoned_carts", "reaction.cart_checkout", "reaction.cart_reminder", "reaction.cart_help"}, order)

	_, err = f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	he := httpapi.AsError(err)
	require.NotNil(t, he)
	assert.Equal(t, "install_failed", he.Code)
	for kind, k := range f.kinds {
		assert.Zero(t, k.count(f.bot), "no %s left", kind)
	}
	require.Len(t, f.kinds[catalog.KindContent].deleted, 1)
	require.Len(t, f.kinds[catalog.KindPopup].deleted, 1)
	require.Len(t, f.deletes.ids, 8)
	var prefixes []string
	for _, id := range f.deletes.ids {
		prefixes = append(prefixes, id[:3])
	}
	assert.Equal(t, []string{"rct", "rct", "col", "pop", "doc", "fld", "lbl", "lbl"}, prefixes, "newest first")
	got, err := f.svc.Get(ctx, f.p, in.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, got.Status)
	require.Len(t, got.Journal, 8)
	for _, e := range got.Journal {
		assert.Equal(t, JournalRolledBack, e.State, "%+v", e)
	}

	// The cause gone, the install creates the content and the popup from the answers.
	f.kinds[catalog.KindReaction].failOn = ""
	got, err = f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &got.Revision})
	require.NoError(t, err)
	require.Len(t, got.Resources, 9)
	var popupID string
	for _, r := range got.Resources {
		if r.Kind == catalog.KindPopup {
			popupID = r.ID
		}
	}
	pop := f.kinds[catalog.KindPopup].items[f.bot][popupID]
	require.NotNil(t, pop)
	assert.Contains(t, string(pop.spec), `"allowed_origins":["https://acme.example"]`)
	assert.Contains(t, string(pop.spec), `https://acme.example/cart`)
	assert.Contains(t, string(pop.spec), `COMEBACK10`)
	assert.NotContains(t, string(pop.spec), "{{answer.")
}

// A plan without popups blocks the install of a playbook with a popup (preflight says so,
// install refuses) and an upgrade to a version that adds one; content needs no feature.
func TestPlanFeaturesBlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	noPopups := *f.p
	noPopups.Entitlements.Plan = []auth.Feature{auth.FeatureBroadcasts}
	in := f.ready(t, 3)

	plan, err := f.svc.Preflight(ctx, &noPopups, in.ID)
	require.NoError(t, err)
	assert.False(t, plan.Ready)
	require.Len(t, plan.Blockers, 1)
	assert.Equal(t, "feature_not_in_plan", plan.Blockers[0].Code)
	assert.Equal(t, "popups", plan.Blockers[0].Feature)
	assert.Equal(t, []PlanItem{{Kind: "popup", Key: "exit_offer", Name: "Abandoned cart: exit offer"}}, plan.Blockers[0].Resources)
	_, err = f.svc.Install(ctx, &noPopups, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	he := httpapi.AsError(err)
	require.NotNil(t, he)
	assert.Equal(t, "playbook_not_ready", he.Code)
	assert.NotEmpty(t, he.Extensions["blockers"])
	for kind, k := range f.kinds {
		assert.Zero(t, k.count(f.bot), "no %s created", kind)
	}

	// Version 2 has no popup: it installs; the upgrade to 3 needs the website and the plan.
	old := f.ready(t, 2)
	old, err = f.svc.Install(ctx, &noPopups, old.ID, InstallRequest{ExpectedRevision: &old.Revision})
	require.NoError(t, err)
	_, err = f.svc.Upgrade(ctx, &noPopups, old.ID, UpgradeRequest{ToVersion: 3, DryRun: true})
	he = httpapi.AsError(err)
	require.NotNil(t, he)
	assert.Equal(t, "playbook_not_ready", he.Code)
	assert.Equal(t, []string{"website"}, he.Extensions["missing_answers"])
	website := answers(t, map[string]any{"website": "https://acme.example"})
	_, err = f.svc.Upgrade(ctx, &noPopups, old.ID, UpgradeRequest{ToVersion: 3, DryRun: true, Answers: website})
	he = httpapi.AsError(err)
	require.NotNil(t, he)
	assert.Equal(t, "playbook_not_ready", he.Code)
	assert.Equal(t, "feature_not_in_plan", he.Extensions["blockers"].([]Blocker)[0].Code)
	_, err = f.svc.Upgrade(ctx, f.p, old.ID, UpgradeRequest{ToVersion: 3, Answers: answers(t, map[string]any{"website": "nope"}), ExpectedRevision: &old.Revision})
	assert.Equal(t, httpapi.KindInvalid, httpapi.KindOf(err), "upgrade answers are checked")

	up, err := f.svc.Upgrade(ctx, f.p, old.ID, UpgradeRequest{ToVersion: 3, Answers: website, ExpectedRevision: &old.Revision})
	require.NoError(t, err)
	actions := map[string]string{}
	for _, d := range up.Diff {
		actions[d.Key] = d.Action
	}
	assert.Equal(t, ActionCreate, actions["cart_reminder_message"])
	assert.Equal(t, ActionCreate, actions["exit_offer"])
	assert.Equal(t, ActionUnchanged, actions["cart_checkout"])
	assert.Equal(t, "https://acme.example", up.Install.Answers["website"], "the upgrade's answers are saved")
	assert.Equal(t, 1, f.kinds[catalog.KindPopup].count(f.bot))
	assert.Equal(t, 1, f.kinds[catalog.KindContent].count(f.bot))
}

// The popup KPI counts the conversions of the install's popup only.
func TestPopupKPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in := f.ready(t, 3)
	in, err := f.svc.Install(ctx, f.p, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	var popupID string
	for _, r := range in.Resources {
		if r.Key == "exit_offer" {
			popupID = r.ID
		}
	}
	day := t0.Add(time.Hour)
	_, err = f.events.Append(ctx,
		eventlog.Event{ID: "p1", BotID: f.bot, Name: eventlog.PopupSubmitted, At: day, Channel: "web", Source: eventlog.SourcePopup, Properties: map[string]any{"popup_id": popupID}},
		eventlog.Event{ID: "p2", BotID: f.bot, Name: eventlog.PopupSubmitted, At: day, Channel: "web", Source: eventlog.SourcePopup, Properties: map[string]any{"popup_id": "pop_other"}},
		eventlog.Event{ID: "p3", BotID: f.bot, Name: eventlog.PopupShown, At: day, Channel: "web", Source: eventlog.SourcePopup, Properties: map[string]any{"popup_id": popupID}},
	)
	require.NoError(t, err)
	k, err := f.svc.KPIs(ctx, f.p, in.ID, t0, t0.Add(24*time.Hour))
	require.NoError(t, err)
	var got *KPIResult
	for i := range k.KPIs {
		if k.KPIs[i].ID == "exit_offers_taken" {
			got = &k.KPIs[i]
		}
	}
	require.NotNil(t, got)
	assert.Equal(t, int64(1), got.Value)
}

// installedV1 installs abandoned_cart version 1 and returns it with the ids of its checkout
// reaction, which version 2 changes (version 2 also adds the cart_help reaction).
func (f *fixture) installedV1(t *testing.T) (Install, string) {
	t.Helper()
	in := f.ready(t, 1)
	in, err := f.svc.Install(context.Background(), f.p, in.ID, InstallRequest{ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	for _, r := range in.Resources {
		if r.Key == "cart_checkout" {
			return in, r.ID
		}
	}
	t.Fatal("version 1 has no cart_checkout")
	return in, ""
}

// A second upgrade while one is under way is refused before it changes anything, whether
// it names the revision both read (stale_revision: the first one's claim moved it) or the
// current one (upgrade_in_progress); the first one's changes stand.
func TestConcurrentUpgradeIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in, checkoutID := f.installedV1(t)
	reactions := f.kinds[catalog.KindReaction]
	var second, third error
	reactions.before = func(op, _ string) {
		if op != "create" || second != nil {
			return
		}
		// Mid-way through the first upgrade (after its claim, at its first create).
		_, second = f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 2, ExpectedRevision: &in.Revision})
		cur, err := f.svc.Get(ctx, f.p, in.ID)
		require.NoError(t, err)
		_, third = f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 2, ExpectedRevision: &cur.Revision})
	}
	up, err := f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 2, ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	assert.Equal(t, "upgrade_in_progress", httpapi.AsError(second).Code, "%v", second)
	assert.Equal(t, "upgrade_in_progress", httpapi.AsError(third).Code, "%v", third)
	assert.Equal(t, 2, up.Install.Version)
	assert.Equal(t, 3, reactions.count(f.bot), "cart_help made once")
	assert.Contains(t, string(reactions.items[f.bot][checkoutID].spec), "Shipping is free today.")

	// The same upgrade request again, with the revision it read before: stale.
	reactions.before = nil
	_, err = f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 3, Answers: answers(t, map[string]any{"website": "https://acme.example"}), ExpectedRevision: &in.Revision})
	assert.Equal(t, "stale_revision", httpapi.AsError(err).Code, "%v", err)
}

// A process that dies mid-upgrade (here: stalls in an update past the stuck time) leaves a
// journal that the recovery job undoes: what it created is deleted, what it updated is set
// back, the install stays at its version with error upgrade_interrupted, and it can be
// upgraded again.
func TestAbandonedUpgradeIsUndone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	in, checkoutID := f.installedV1(t)
	reactions := f.kinds[catalog.KindReaction]
	before := string(reactions.items[f.bot][checkoutID].spec)
	stalled, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	reactions.before = func(op, id string) {
		// The upgrade's update stalls; the undo's goes through.
		if op == "update" && id == checkoutID && first.CompareAndSwap(false, true) {
			close(stalled)
			<-release
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 2, ExpectedRevision: &in.Revision})
		done <- err
	}()
	<-stalled
	assert.Equal(t, 3, reactions.count(f.bot), "cart_help was created before the stall")

	got, err := f.svc.Get(ctx, f.p, in.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Version, "not stuck yet: a read leaves it alone")
	f.clock.Advance(DefaultStuckAfter + time.Second)
	_, finished, err := f.svc.RecoverStep(ctx, json.RawMessage(fmt.Sprintf(`{"bot_id": %q, "install_id": %q}`, f.bot, in.ID)), "")
	require.NoError(t, err)
	assert.True(t, finished)
	got, err = f.svc.Get(ctx, f.p, in.ID)
	require.NoError(t, err)
	assert.Equal(t, StatusInstalled, got.Status)
	assert.Equal(t, 1, got.Version)
	require.NotNil(t, got.Error)
	assert.Equal(t, "upgrade_interrupted", got.Error.Code)
	assert.Equal(t, 2, reactions.count(f.bot), "cart_help deleted")
	assert.JSONEq(t, before, string(reactions.items[f.bot][checkoutID].spec), "the checkout set back")

	// The stalled process wakes: its writes are refused (the recovery moved the revision),
	// and its own undo sets the checkout back again.
	reactions.before = nil
	close(release)
	err = <-done
	require.Error(t, err)
	assert.Equal(t, 2, reactions.count(f.bot))
	assert.JSONEq(t, before, string(reactions.items[f.bot][checkoutID].spec))

	got, err = f.svc.Get(ctx, f.p, in.ID)
	require.NoError(t, err)
	up, err := f.svc.Upgrade(ctx, f.p, in.ID, UpgradeRequest{ToVersion: 2, ExpectedRevision: &got.Revision})
	require.NoError(t, err)
	assert.Equal(t, 2, up.Install.Version)
	assert.Nil(t, up.Install.Error, "a finished upgrade clears the interruption")
	assert.Equal(t, 3, reactions.count(f.bot))
}
