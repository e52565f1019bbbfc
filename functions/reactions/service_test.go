package reactions

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()

	r := f.create(t, `{"name":"Welcome","trigger":{"type":"start"},"steps":[{"id":"hi","type":"send_text","text":"Hi"}]}`)
	assert.Equal(t, int64(1), r.Revision)
	assert.Nil(t, r.PublishedVersion)
	assert.Nil(t, r.PublishedAt)
	assert.True(t, r.HasUnpublishedChanges)
	assert.Equal(t, r.CreatedAt, r.UpdatedAt)
	assert.Zero(t, r.CreatedAt.Nanosecond(), "whole seconds")

	got, err := f.svc.Get(ctx, f.bot, r.ID)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	// Publishing freezes revision 1 as version 1 and moves the revision.
	p, err := f.svc.Publish(ctx, f.bot, r.ID, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(2), p.Revision)
	assert.Equal(t, ptr(int64(1)), p.PublishedVersion)
	assert.False(t, p.HasUnpublishedChanges)
	// Publishing again without a change is a no-op.
	again, err := f.svc.Publish(ctx, f.bot, r.ID, 2)
	require.NoError(t, err)
	assert.Equal(t, p, again)

	// Editing the draft leaves version 1 alone.
	newSteps := steps(t, `[{"id":"hi","type":"send_text","text":"Hello"}]`)
	u, err := f.svc.Update(ctx, f.bot, r.ID, 2, Patch{Steps: &newSteps, Name: ptr("Greeting")})
	require.NoError(t, err)
	assert.Equal(t, int64(3), u.Revision)
	assert.True(t, u.HasUnpublishedChanges)
	assert.Equal(t, "Greeting", u.Name)
	assert.Equal(t, TriggerStart, u.Trigger.Type, "parts not given are kept")
	v1, err := f.svc.Version(ctx, f.bot, r.ID, 1)
	require.NoError(t, err)
	assert.Equal(t, "Hi", v1.Steps[0].Text)
	assert.Equal(t, "Welcome", v1.Name)
	assert.Equal(t, int64(1), v1.DraftRevision)

	// A patch that changes nothing makes no revision.
	same, err := f.svc.Update(ctx, f.bot, r.ID, 3, Patch{Name: ptr(" Greeting ")})
	require.NoError(t, err)
	assert.Equal(t, int64(3), same.Revision)

	p2, err := f.svc.Publish(ctx, f.bot, r.ID, 3)
	require.NoError(t, err)
	assert.Equal(t, ptr(int64(2)), p2.PublishedVersion)
	list, next, err := f.svc.Versions(ctx, f.bot, r.ID, 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, list, 2)
	assert.Equal(t, []int64{2, 1}, []int64{list[0].Version, list[1].Version}, "newest first")
	assert.Equal(t, 1, list[0].StepCount)

	// Stale revisions are refused, whatever else the request says.
	_, err = f.svc.Update(ctx, f.bot, r.ID, 3, Patch{Name: ptr("")})
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	assert.Equal(t, int64(4), httpapitest.AsError(t, err).Extensions["current_revision"])
	_, err = f.svc.Publish(ctx, f.bot, r.ID, 1)
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, f.svc.Delete(ctx, f.bot, r.ID, ptr(int64(1)))).Code)

	require.NoError(t, f.svc.Delete(ctx, f.bot, r.ID, ptr(int64(4))))
	for _, err := range []error{
		func() error { _, err := f.svc.Get(ctx, f.bot, r.ID); return err }(),
		func() error { _, err := f.svc.Version(ctx, f.bot, r.ID, 1); return err }(),
		func() error { _, _, err := f.svc.Versions(ctx, f.bot, r.ID, 10, ""); return err }(),
		f.svc.Delete(ctx, f.bot, r.ID, nil),
	} {
		assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
	}
	// Its versions are gone from the store, not just unreachable.
	page, err := f.store.Query(ctx, store.Query{PK: versionsPK(f.bot, r.ID)})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	// And its name is free again.
	f.create(t, `{"name":"greeting","trigger":{"type":"api"}}`)
}

func TestPublishValidatesAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	vip := f.vocab.label(f.bot, "vip")
	r := f.create(t, fmt.Sprintf(`{"name":"Tag","trigger":{"type":"api"},"steps":[{"id":"a","type":"add_label","label_id":%q}]}`, vip))
	f.vocab.dropLabel(f.bot, vip)
	_, err := f.svc.Publish(ctx, f.bot, r.ID, 1)
	code, got := paths(t, err)
	assert.Equal(t, "invalid_steps", code)
	assert.Equal(t, []string{"steps[0].label_id"}, got)

	empty := f.create(t, `{"name":"Empty","trigger":{"type":"api"}}`)
	_, err = f.svc.Publish(ctx, f.bot, empty.ID, 1)
	code, got = paths(t, err)
	assert.Equal(t, "invalid_steps", code)
	assert.Equal(t, []string{"steps"}, got)
}

func TestNamesAreUniqueIgnoringCase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	a := f.create(t, `{"name":"Menu","trigger":{"type":"api"}}`)
	_, err := f.svc.Create(ctx, f.bot, content(t, `{"name":"MENU","trigger":{"type":"api"}}`))
	assert.Equal(t, "name_taken", httpapitest.AsError(t, err).Code)
	assert.Equal(t, a.ID, httpapitest.AsError(t, err).Extensions["conflicting_id"])

	b := f.create(t, `{"name":"Other","trigger":{"type":"api"}}`)
	_, err = f.svc.Update(ctx, f.bot, b.ID, 1, Patch{Name: ptr("menu")})
	assert.Equal(t, "name_taken", httpapitest.AsError(t, err).Code)
	// A reaction may change the case of its own name.
	r, err := f.svc.Update(ctx, f.bot, a.ID, 1, Patch{Name: ptr("menu")})
	require.NoError(t, err)
	assert.Equal(t, "menu", r.Name)
	// Renaming frees the old name.
	_, err = f.svc.Update(ctx, f.bot, a.ID, 2, Patch{Name: ptr("Main menu")})
	require.NoError(t, err)
	f.create(t, `{"name":"Menu","trigger":{"type":"api"}}`)
	// Another bot has its own names.
	_, err = f.svc.Create(ctx, "bot_other", content(t, `{"name":"Menu","trigger":{"type":"api"}}`))
	require.NoError(t, err)
}

func TestReferencedReactionsCannotBeDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	target := f.create(t, `{"name":"Target","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	from := f.create(t, fmt.Sprintf(`{"name":"From","trigger":{"type":"start"},"steps":[{"id":"a","type":"goto","reaction_id":%q}]}`, target.ID))

	err := f.svc.Delete(ctx, f.bot, target.ID, nil)
	assert.Equal(t, "reaction_in_use", httpapitest.AsError(t, err).Code)
	assert.Equal(t, []string{from.ID}, httpapitest.AsError(t, err).Extensions["referenced_by"])

	// Published, then the draft drops the goto: the published version still goes there.
	_, err = f.svc.Publish(ctx, f.bot, from.ID, 1)
	require.NoError(t, err)
	none := steps(t, `[{"id":"a","type":"end"}]`)
	_, err = f.svc.Update(ctx, f.bot, from.ID, 2, Patch{Steps: &none})
	require.NoError(t, err)
	assert.Equal(t, "reaction_in_use", httpapitest.AsError(t, f.svc.Delete(ctx, f.bot, target.ID, nil)).Code)

	// Publishing the draft without the goto releases the target.
	_, err = f.svc.Publish(ctx, f.bot, from.ID, 3)
	require.NoError(t, err)
	require.NoError(t, f.svc.Delete(ctx, f.bot, target.ID, nil))

	// Deleting a referrer releases its targets.
	t2 := f.create(t, `{"name":"T2","trigger":{"type":"api"}}`)
	r2 := f.create(t, fmt.Sprintf(`{"name":"R2","trigger":{"type":"api"},"steps":[{"id":"a","type":"goto","reaction_id":%q}]}`, t2.ID))
	require.NoError(t, f.svc.Delete(ctx, f.bot, r2.ID, nil))
	require.NoError(t, f.svc.Delete(ctx, f.bot, t2.ID, nil))

	reg, err := f.svc.loadRegistry(ctx, f.bot)
	require.NoError(t, err)
	assert.Empty(t, reg.Inbound)
	assert.Len(t, reg.Names, 1, "only From is left")
}

// A goto and the deletion of its target race: either the goto is refused (422) or the
// deletion is (409); never both succeed.
func TestGotoAndDeleteRace(t *testing.T) {
	t.Parallel()
	for i := range 10 {
		f := newFixture(t)
		ctx := t.Context()
		target := f.create(t, fmt.Sprintf(`{"name":"Target %d","trigger":{"type":"api"}}`, i))
		from := f.create(t, `{"name":"From","trigger":{"type":"api"}}`)
		jump := steps(t, fmt.Sprintf(`[{"id":"a","type":"goto","reaction_id":%q}]`, target.ID))
		var wg sync.WaitGroup
		var updErr, delErr error
		wg.Add(2)
		go func() { defer wg.Done(); _, updErr = f.svc.Update(ctx, f.bot, from.ID, 1, Patch{Steps: &jump}) }()
		go func() { defer wg.Done(); delErr = f.svc.Delete(ctx, f.bot, target.ID, nil) }()
		wg.Wait()
		require.False(t, updErr == nil && delErr == nil, "the goto and the deletion both succeeded")
		require.True(t, updErr == nil || delErr == nil, "both failed: %v / %v", updErr, delErr)
	}
}

func TestConcurrentPatchOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.create(t, `{"name":"Race","trigger":{"type":"api"}}`)
	const n = 8
	results := make(chan error, n)
	for i := range n {
		go func() {
			_, err := f.svc.Update(context.Background(), f.bot, r.ID, 1, Patch{Name: ptr(fmt.Sprintf("writer %d", i))})
			results <- err
		}()
	}
	wins := 0
	for range n {
		if err := <-results; err == nil {
			wins++
		} else {
			assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
		}
	}
	assert.Equal(t, 1, wins)
	reg, err := f.svc.loadRegistry(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Len(t, reg.Names, 1, "the losers left no name behind")
}

func TestReactionLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Fill the registry directly: a thousand creates through the service would only be slower.
	reg, err := f.svc.loadRegistry(t.Context(), f.bot)
	require.NoError(t, err)
	for i := range MaxReactionsPerBot {
		reg.Names[nameKey(fmt.Sprint(i))] = fmt.Sprintf("rct_%d", i)
	}
	w, err := reg.write(f.bot)
	require.NoError(t, err)
	require.NoError(t, f.store.Transact(t.Context(), []store.Write{w}))
	_, err = f.svc.Create(t.Context(), f.bot, content(t, `{"name":"One too many","trigger":{"type":"api"}}`))
	assert.Equal(t, "limit_reached", httpapitest.AsError(t, err).Code)
}

func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	var want []string
	for i := range 7 {
		trig := `{"type":"api"}`
		if i%2 == 0 {
			trig = `{"type":"start"}`
		}
		r := f.create(t, fmt.Sprintf(`{"name":"R%d","trigger":%s,"steps":[{"id":"a","type":"end"}]}`, i, trig))
		want = append(want, r.ID)
		if i%3 == 0 {
			_, err := f.svc.Publish(ctx, f.bot, r.ID, 1)
			require.NoError(t, err)
		}
	}
	collect := func(flt Filter, limit int) []string {
		var got []string
		cursor := ""
		for {
			page, next, err := f.svc.List(ctx, f.bot, flt, limit, cursor)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(page), limit)
			for _, s := range page {
				got = append(got, s.ID)
				assert.Equal(t, 1, s.StepCount)
			}
			if next == "" {
				return got
			}
			cursor = next
		}
	}
	assert.Equal(t, want, collect(Filter{}, 3), "oldest first, every one once")
	assert.Equal(t, []string{want[0], want[2], want[4], want[6]}, collect(Filter{TriggerType: TriggerStart}, 2))
	assert.Equal(t, []string{want[0], want[3], want[6]}, collect(Filter{Published: ptr(true)}, 2))
	assert.Equal(t, []string{want[1], want[2], want[4], want[5]}, collect(Filter{Published: ptr(false)}, 50))
	assert.Equal(t, []string{want[0], want[6]}, collect(Filter{TriggerType: TriggerStart, Published: ptr(true)}, 1))
}

func TestMalformedIDsAreNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{"", "export", "rct_", "bot_0000000000000000000000000a", "rct_0000000000000000000000000A"} {
		_, err := f.svc.Get(t.Context(), f.bot, id)
		assert.Equal(t, 404, httpapitest.AsError(t, err).Status(), id)
	}
}

// queryCounter counts store queries.
type queryCounter struct {
	store.Store
	mu      sync.Mutex
	queries int
}

func (q *queryCounter) Query(ctx context.Context, qu store.Query) (store.Page, error) {
	q.mu.Lock()
	q.queries++
	q.mu.Unlock()
	return q.Store.Query(ctx, qu)
}

// A filter that matches rarely reads in batches, not one reaction per query, and never
// skips or repeats one.
func TestSparseFilterReadsInBatches(t *testing.T) {
	t.Parallel()
	base := newFixture(t)
	qc := &queryCounter{Store: base.store}
	f := newFixtureOn(t, qc, base.clock)
	var want []string
	for i := range 150 {
		trig := `{"type":"api"}`
		if i == 5 || i == 120 {
			trig = `{"type":"start"}`
		}
		r := f.create(t, fmt.Sprintf(`{"name":"R%d","trigger":%s}`, i, trig))
		if i == 5 || i == 120 {
			want = append(want, r.ID)
		}
	}
	qc.mu.Lock()
	qc.queries = 0
	qc.mu.Unlock()
	var got []string
	cursor, pages := "", 0
	for {
		page, next, err := f.svc.List(t.Context(), f.bot, Filter{TriggerType: TriggerStart}, 1, cursor)
		require.NoError(t, err)
		pages++
		for _, s := range page {
			got = append(got, s.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, want, got)
	assert.LessOrEqual(t, pages, 3)
	assert.LessOrEqual(t, qc.queries, 5, "batches of %d", filterBatch)
}
