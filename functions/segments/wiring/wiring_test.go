package wiring

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/funnels"
	funnelswiring "github.com/botplatform/api/functions/funnels/wiring"
	"github.com/botplatform/api/functions/segments"
	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
)

// The funnel reads segments read to tell staleness run in the segments Lambda (infra/access).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "segments")) }

func ptr[T any](v T) *T { return &v }

// A funnel's cohort saved as a segment is current until the funnel's steps change (a rename
// does not stale it), and stale once they do or the funnel is deleted: the segment's GET
// says so and Resolve, what a broadcast audience calls, refuses it with ErrStale.
func TestCohortThenStale(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	env := familytest.Env(t, family.Deps{Now: func() time.Time { return now }})
	ctx := t.Context()
	bot := ids.At("bot", now)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, e := range []eventlog.Event{
		{SubscriberID: "sub_1", Name: "a", At: t0},
		{SubscriberID: "sub_1", Name: "b", At: t0.Add(time.Minute)},
		{SubscriberID: "sub_2", Name: "a", At: t0},
	} {
		e.ID, e.BotID, e.Source = string(rune('a'+i)), bot, eventlog.SourceCustom
		_, err := env.Events.Append(ctx, e)
		require.NoError(t, err)
	}

	segs := Service(env)
	fnl := funnels.NewService(env.Store, env.Events, funnelswiring.Cohorts{Segments: segs}, env.Now)
	f, err := fnl.Create(ctx, bot, funnels.Definition{Name: ptr("F"), Steps: &[]funnels.Step{{Event: "a"}, {Event: "b"}}})
	require.NoError(t, err)
	saved, id, err := fnl.Cohort(ctx, bot, f.ID, funnels.CohortRequest{Name: ptr("Stopped at a"),
		From: ptr("2026-03-01T00:00:00Z"), To: ptr("2026-03-02T00:00:00Z"), Step: json.RawMessage(`1`)})
	require.NoError(t, err)
	seg := saved.(segments.Segment)
	assert.Equal(t, seg.ID, id)
	assert.Equal(t, int64(1), seg.MemberCount)
	assert.Equal(t, segments.Source{Kind: segments.KindFunnelCohort, ID: f.ID, Revision: 1,
		Definition: json.RawMessage(`{"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z","step":1,"converted":false,"breakdown":null}`)}, seg.Source)
	members, next, err := segs.Members(ctx, bot, seg.ID, "", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"sub_2"}, members)
	assert.Empty(t, next)

	_, err = segs.Resolve(ctx, bot, seg.ID)
	require.NoError(t, err, "current")
	f, err = fnl.Update(ctx, bot, f.ID, 1, funnels.Definition{Name: ptr("Renamed")})
	require.NoError(t, err)
	_, err = segs.Resolve(ctx, bot, seg.ID)
	require.NoError(t, err, "a rename does not stale the cohort")

	_, err = fnl.Update(ctx, bot, f.ID, f.Revision, funnels.Definition{Steps: &[]funnels.Step{{Event: "a"}, {Event: "c"}}})
	require.NoError(t, err)
	got, err := segs.Get(ctx, bot, seg.ID)
	require.NoError(t, err)
	assert.True(t, got.Stale)
	_, err = segs.Resolve(ctx, bot, seg.ID)
	require.ErrorIs(t, err, segments.ErrStale)
	assert.Equal(t, httpapi.KindConflict, httpapi.KindOf(err))

	// A cohort of the changed funnel is current; deleting the funnel stales it too.
	saved, _, err = fnl.Cohort(ctx, bot, f.ID, funnels.CohortRequest{Name: ptr("Again"),
		From: ptr("2026-03-01T00:00:00Z"), To: ptr("2026-03-02T00:00:00Z"), Step: json.RawMessage(`"converted"`)})
	require.NoError(t, err)
	again := saved.(segments.Segment)
	assert.Equal(t, int64(0), again.MemberCount)
	_, err = segs.Resolve(ctx, bot, again.ID)
	require.NoError(t, err)
	require.NoError(t, fnl.Delete(ctx, bot, f.ID, nil))
	_, err = segs.Resolve(ctx, bot, again.ID)
	require.ErrorIs(t, err, segments.ErrStale)
}
