package segments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// sources are the current revisions of fake funnels; a missing one was deleted.
type sources struct {
	mu   sync.Mutex
	revs map[string]int64
	err  error
}

func (s *sources) revision(_ context.Context, _, id string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	r, ok := s.revs[id]
	if !ok {
		return 0, httpapi.NotFound("funnel")
	}
	return r, nil
}

func (s *sources) set(id string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revs[id] = rev
}

type fixture struct {
	svc   *Service
	raw   *sqlitetest.Store
	clock *httpapitest.Clock
	src   *sources
	bot   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{raw: raw, clock: c, src: &sources{revs: map[string]int64{"fnl_a": 1}}, bot: ids.At("bot", t0)}
	f.svc = NewService(Config{Store: raw, Now: c.Now, Sources: map[string]func(context.Context, string, string) (int64, error){
		KindFunnelCohort: f.src.revision,
	}})
	return f
}

func cohort(name string, members ...string) New {
	return New{Name: name, Source: Source{Kind: KindFunnelCohort, ID: "fnl_a", Revision: 1, Definition: json.RawMessage(`{"step":2}`)}, Members: members}
}

func (f *fixture) save(t *testing.T, n New) Segment {
	t.Helper()
	seg, err := f.svc.Save(t.Context(), f.bot, n)
	require.NoError(t, err)
	f.clock.Advance(time.Second) // ids sort by creation time
	return seg
}

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("sub_%06d", i)
	}
	return out
}

// allMembers reads every member of a segment page by page.
func (f *fixture) allMembers(t *testing.T, id string, limit int) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		page, next, err := f.svc.Members(t.Context(), f.bot, id, cursor, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), limit)
		out = append(out, page...)
		if next == "" {
			return out
		}
		cursor = next
	}
}

func TestSaveAndRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	seg := f.save(t, cohort("Stopped at 2", "s3", "s1", "s2", "s1"))
	assert.True(t, ids.Valid("seg", seg.ID))
	assert.Equal(t, int64(3), seg.MemberCount, "duplicates are kept once")
	assert.Equal(t, t0, seg.ComputedAt)
	assert.False(t, seg.Stale)
	assert.JSONEq(t, `{"step":2}`, string(seg.Source.Definition))

	got, err := f.svc.Get(t.Context(), f.bot, seg.ID)
	require.NoError(t, err)
	assert.Equal(t, seg, got)
	assert.Equal(t, []string{"s1", "s2", "s3"}, f.allMembers(t, seg.ID, 2), "sorted, paged")

	_, err = f.svc.Get(t.Context(), f.bot, "seg_nope")
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	_, err = f.svc.Get(t.Context(), "bot_other", seg.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "another bot's segment is not found")
	_, _, err = f.svc.Members(t.Context(), "bot_other", seg.ID, "", 10)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	empty := f.save(t, cohort("Nobody"))
	assert.Equal(t, int64(0), empty.MemberCount)
	page, next, err := f.svc.Members(t.Context(), f.bot, empty.ID, "", 10)
	require.NoError(t, err)
	assert.Empty(t, page)
	assert.Empty(t, next)
}

// Members are stored in chunks of ChunkSize; pages cross chunk boundaries.
func TestMembersAcrossChunks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	all := members(2*ChunkSize + 17)
	seg := f.save(t, cohort("Big", all...))
	assert.Equal(t, int64(len(all)), seg.MemberCount)
	page, err := f.raw.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: membersPK(f.bot)})
	require.NoError(t, err)
	assert.Len(t, page.Items, 3, "three chunks")
	assert.Equal(t, all, f.allMembers(t, seg.ID, 333))
	assert.Equal(t, all, f.allMembers(t, seg.ID, 1000))

	// A cursor is a position in this segment only.
	_, next, err := f.svc.Members(t.Context(), f.bot, seg.ID, "", 10)
	require.NoError(t, err)
	other := f.save(t, cohort("Small", "a", "b"))
	for _, c := range []string{next, "m0", "m-1", "x10", "m010", "m99999999"} {
		_, _, err = f.svc.Members(t.Context(), f.bot, other.ID, c, 10)
		assert.ErrorIs(t, err, store.ErrInvalidCursor, c)
	}
}

func TestSaveRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.svc.Save(t.Context(), f.bot, cohort("Too big", members(MaxMembers+1)...))
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "cohort_too_large", he.Code)
	assert.Equal(t, 422, he.Status())

	n := cohort("", "ok", "")
	n.Source = Source{Kind: "survey", Revision: 0, Definition: json.RawMessage(`[1]`)}
	_, err = f.svc.Save(t.Context(), f.bot, n)
	assert.Equal(t, []string{"name", "source.kind", "source.id", "source.revision", "source.definition", "members[1]"}, httpapitest.InvalidFields(t, err))

	page, err := f.raw.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: membersPK(f.bot)})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "nothing was written")
}

func TestSegmentLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range MaxSegments {
		_, err := f.svc.Save(t.Context(), f.bot, cohort(fmt.Sprint("S", i), "a"))
		require.NoError(t, err)
	}
	_, err := f.svc.Save(t.Context(), f.bot, cohort("One more", "a", "b"))
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "limit_reached", he.Code)
	page, err := f.raw.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: membersPK(f.bot)})
	require.NoError(t, err)
	assert.Len(t, page.Items, MaxSegments, "the refused segment's members were erased")
}

// A segment is stale once its source's definition moved on or was deleted, and when no
// lookup knows its kind; Resolve refuses a stale one with ErrStale, a 409.
func TestStale(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	seg := f.save(t, cohort("Current", "a"))
	got, err := f.svc.Resolve(t.Context(), f.bot, seg.ID)
	require.NoError(t, err)
	assert.False(t, got.Stale)

	f.src.set("fnl_a", 2)
	got, err = f.svc.Get(t.Context(), f.bot, seg.ID)
	require.NoError(t, err)
	assert.True(t, got.Stale)
	_, err = f.svc.Resolve(t.Context(), f.bot, seg.ID)
	require.ErrorIs(t, err, ErrStale)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, 409, he.Status())
	assert.Equal(t, "segment_stale", he.Code)
	assert.Equal(t, seg.ID, he.Extensions["segment_id"])

	// The list tells each segment's staleness, and asks once per source.
	fresh := f.save(t, New{Name: "Fresh", Source: Source{Kind: KindFunnelCohort, ID: "fnl_a", Revision: 2, Definition: json.RawMessage(`{}`)}, Members: []string{"b"}})
	list, next, err := f.svc.List(t.Context(), f.bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, list, 2)
	assert.True(t, list[0].Stale)
	assert.Equal(t, fresh.ID, list[1].ID)
	assert.False(t, list[1].Stale)

	// A deleted source.
	f.src.mu.Lock()
	delete(f.src.revs, "fnl_a")
	f.src.mu.Unlock()
	_, err = f.svc.Resolve(t.Context(), f.bot, fresh.ID)
	assert.ErrorIs(t, err, ErrStale)

	// A kind without a lookup cannot be vouched for.
	exp := f.save(t, New{Name: "Variant B", Source: Source{Kind: KindExperimentCohort, ID: "exp_1", Revision: 1, Definition: json.RawMessage(`{"variant":"b"}`)}, Members: []string{"c"}})
	got, err = f.svc.Get(t.Context(), f.bot, exp.ID)
	require.NoError(t, err)
	assert.True(t, got.Stale)

	// A lookup that fails is an error, not staleness.
	f.src.mu.Lock()
	f.src.err = errors.New("boom")
	f.src.mu.Unlock()
	_, err = f.svc.Get(t.Context(), f.bot, seg.ID)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrStale)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	seg := f.save(t, cohort("Big", members(ChunkSize+1)...))
	keep := f.save(t, cohort("Keep", "a"))
	require.NoError(t, f.svc.Delete(t.Context(), f.bot, seg.ID))
	_, err := f.svc.Get(t.Context(), f.bot, seg.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	err = f.svc.Delete(t.Context(), f.bot, seg.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	page, err := f.raw.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: membersPK(f.bot)})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "only the kept segment's chunk is left")
	assert.Equal(t, chunkKey(f.bot, keep.ID, 0), page.Items[0].Key)
	counter, err := f.raw.Get(sqlitetest.Unrecorded(t.Context()), countKey(f.bot))
	require.NoError(t, err)
	assert.Equal(t, int64(1), counter.Count)
}
