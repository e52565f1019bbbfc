package subscribers

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walkAudience walks the audience of labels a page of limit at a time, running between
// (before page n, from 1) and returning the ids listed, in order.
func walkAudience(t *testing.T, f *fixture, labels []string, limit int, between func(n int)) []string {
	t.Helper()
	var got []string
	cursor := ""
	for n := 1; n <= 100; n++ {
		if between != nil {
			between(n)
		}
		page, next, err := f.svc.Audience(t.Context(), f.bot, labels, limit, cursor)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(page), limit)
		for _, s := range page {
			got = append(got, s.ID)
		}
		if next == "" {
			return got
		}
		require.NotEqual(t, cursor, next, "every page moves on")
		cursor = next
	}
	t.Fatal("the walk never ended")
	return nil
}

// An audience of several labels lists each subscriber that has any of them once, oldest
// first, whatever the page size: the labels' memberships are merged by subscriber id.
func TestAudienceListsEachSubscriberOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	ctx := t.Context()
	a, b, c := f.label(t, "A"), f.label(t, "B"), f.label(t, "C")
	var want []string
	for i := range 12 {
		var add []string
		if i%2 == 0 {
			add = append(add, a.ID)
		}
		if i%3 == 0 {
			add = append(add, b.ID)
		}
		if i == 7 {
			add = append(add, c.ID) // outside the audience
		}
		s, _, err := f.svc.Upsert(ctx, f.bot, ChannelTelegram, fmt.Sprint(i), Changes{AddLabels: add})
		require.NoError(t, err)
		if i%2 == 0 || i%3 == 0 {
			want = append(want, s.ID)
		}
	}
	for _, limit := range []int{1, 2, 3, 5, 500} {
		assert.Equal(t, want, walkAudience(t, f, []string{a.ID, b.ID}, limit, nil), "limit %d", limit)
	}
	all := walkAudience(t, f, nil, 5, nil)
	assert.Len(t, all, 12, "no labels: every subscriber")
	assert.Empty(t, walkAudience(t, f, []string{"lbl_missing0000000000000000"}, 5, nil))
}

// Labelled meanwhile: a subscriber that gains an audience label during the walk, or loses
// one of two, is listed once all the same (a walk one label after another would skip the
// first and list the second twice).
func TestAudienceWhileLabelsChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	ctx := t.Context()
	a, b := f.label(t, "A"), f.label(t, "B")
	var subs []Subscriber
	for i := range 6 {
		s, _, err := f.svc.Upsert(ctx, f.bot, ChannelTelegram, fmt.Sprint(i), Changes{AddLabels: []string{b.ID}})
		require.NoError(t, err)
		subs = append(subs, s)
	}
	got := walkAudience(t, f, []string{a.ID, b.ID}, 2, func(n int) {
		if n == 2 {
			_, err := f.svc.Update(ctx, f.bot, subs[5].ID, subs[5].Revision, Changes{AddLabels: []string{a.ID}})
			require.NoError(t, err)
			_, err = f.svc.Update(ctx, f.bot, subs[4].ID, subs[4].Revision, Changes{AddLabels: []string{a.ID}, RemoveLabels: []string{b.ID}})
			require.NoError(t, err)
		}
	})
	want := make([]string, len(subs))
	for i, s := range subs {
		want[i] = s.ID
	}
	assert.Equal(t, want, got)
}

// A walk begun one label after another, before the merge, goes on that way from its cursor.
func TestAudienceGoesOnFromAnOldCursor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	ctx := t.Context()
	a, b := f.label(t, "A"), f.label(t, "B")
	both, _, err := f.svc.Upsert(ctx, f.bot, ChannelTelegram, "1", Changes{AddLabels: []string{a.ID, b.ID}})
	require.NoError(t, err)
	page, next, err := f.svc.Audience(ctx, f.bot, []string{a.ID, b.ID}, 10, "1:")
	require.NoError(t, err)
	assert.Equal(t, []string{both.ID}, idsOf(page), "the second label's walk")
	assert.Empty(t, next)
	_, _, err = f.svc.Audience(ctx, f.bot, []string{a.ID, b.ID}, 10, "7:")
	assert.Error(t, err, "no such label index: not a cursor of this audience")
	_, _, err = f.svc.Audience(ctx, f.bot, nil, 10, "m:x")
	assert.Error(t, err)
}

func idsOf(subs []Subscriber) []string {
	out := make([]string, len(subs))
	for i, s := range subs {
		out[i] = s.ID
	}
	return out
}
