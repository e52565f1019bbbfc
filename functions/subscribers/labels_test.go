package subscribers

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

func TestCreateLabelValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	tests := []struct {
		name, label string
		want        string // "" created, else the error code
		stored      string
	}{
		{"plain", "VIP", "", "VIP"},
		{"trimmed", "  Refund asked \t", "", "Refund asked"},
		{"50 characters", strings.Repeat("ж", MaxLabelNameLen), "", strings.Repeat("ж", MaxLabelNameLen)},
		{"51 characters", strings.Repeat("ж", MaxLabelNameLen+1), "validation_failed", ""},
		{"empty", "", "validation_failed", ""},
		{"blank", "   ", "validation_failed", ""},
		{"control character", "a\u0007b", "validation_failed", ""},
		{"same name", "VIP", "name_taken", ""},
		{"other case", "vip", "name_taken", ""},
		{"case-folded sharp s", "STRASSE", "", "STRASSE"},
		{"sharp s folds to ss", "straße", "name_taken", ""},
	}
	for _, tt := range tests {
		l, err := f.svc.CreateLabel(t.Context(), f.bot, tt.label)
		if tt.want == "" {
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.stored, l.Name, tt.name)
			assert.Equal(t, int64(1), l.Revision, tt.name)
			assert.Equal(t, t0, l.CreatedAt, tt.name)
			continue
		}
		require.Error(t, err, tt.name)
		assert.Equal(t, tt.want, httpapitest.AsError(t, err).Code, tt.name)
	}
	// name_taken names the label that holds the name, and is detectable by callers.
	_, err := f.svc.CreateLabel(t.Context(), f.bot, "vIP")
	assert.True(t, errors.Is(err, ErrNameTaken))
	all, lerr := f.svc.Labels(t.Context(), f.bot)
	require.NoError(t, lerr)
	assert.Equal(t, all[0].ID, httpapitest.AsError(t, err).Extensions["conflicting_id"])
}

func TestLabelLimitHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	for i := range MaxLabelsPerBot - 5 {
		f.label(t, fmt.Sprintf("label %d", i))
	}
	// Twenty writers race for the last five places.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			_, err := f.svc.CreateLabel(t.Context(), f.bot, fmt.Sprintf("racer %d", i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	created, limited := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, ErrLimitReached):
			limited++
			assert.Equal(t, "limit_reached", httpapitest.AsError(t, err).Code)
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	assert.Equal(t, 5, created)
	assert.Equal(t, 15, limited)
	all, err := f.svc.Labels(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Len(t, all, MaxLabelsPerBot)

	// Deleting one makes room for one.
	require.NoError(t, f.svc.DeleteLabel(t.Context(), f.bot, all[0].ID, nil))
	f.label(t, "one more")
	_, err = f.svc.CreateLabel(t.Context(), f.bot, "and another")
	assert.True(t, errors.Is(err, ErrLimitReached))
}

func TestRenameLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	vip := f.label(t, "VIP")
	other := f.label(t, "Other")
	f.clock.Advance(90 * time.Second)

	tests := []struct {
		name     string
		id       string
		expected int64
		newName  string
		code     string // "" succeeds
		revision int64
	}{
		{"same name changes nothing", vip.ID, 1, "VIP", "", 1},
		{"stale", vip.ID, 7, "Gold", "stale_revision", 0},
		{"invalid name before revision", vip.ID, 7, "", "validation_failed", 0},
		{"taken by another", vip.ID, 1, "other", "name_taken", 0},
		{"case only", vip.ID, 1, "Vip", "", 2},
		{"new name", vip.ID, 2, "Gold", "", 3},
		{"old name is free again", other.ID, 1, "vip", "", 2},
		{"unknown label", "lbl_00000000000000000000000000", 1, "x", "not_found", 0},
		{"malformed id", "nope", 1, "x", "not_found", 0},
	}
	for _, tt := range tests {
		l, err := f.svc.RenameLabel(t.Context(), f.bot, tt.id, tt.expected, tt.newName)
		if tt.code != "" {
			require.Error(t, err, tt.name)
			assert.Equal(t, tt.code, httpapitest.AsError(t, err).Code, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.revision, l.Revision, tt.name)
		assert.Equal(t, tt.newName, l.Name, tt.name)
	}
	got, err := f.svc.GetLabel(t.Context(), f.bot, vip.ID)
	require.NoError(t, err)
	assert.Equal(t, "Gold", got.Name)
	assert.Equal(t, int64(3), got.Revision)
	assert.Equal(t, t0, got.CreatedAt, "created_at does not move")
	assert.Equal(t, t0.Add(90*time.Second), got.UpdatedAt)
	stale, err := f.svc.RenameLabel(t.Context(), f.bot, vip.ID, 1, "Platinum")
	assert.Empty(t, stale)
	assert.Equal(t, int64(3), httpapitest.AsError(t, err).Extensions["current_revision"])
}

func TestEnsureLabels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	vip := f.label(t, "VIP")
	got, err := f.svc.EnsureLabels(t.Context(), f.bot, []string{"vip", "New one", " new ONE ", "VIP"})
	require.NoError(t, err)
	assert.Equal(t, vip.ID, got["vip"])
	assert.Equal(t, vip.ID, got["VIP"])
	assert.Equal(t, got["New one"], got[" new ONE "], "one label per folded name")
	all, err := f.svc.Labels(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Len(t, all, 2)
	assert.Equal(t, "New one", all[1].Name)

	_, err = f.svc.EnsureLabels(t.Context(), f.bot, []string{"fine", ""})
	assert.Equal(t, []string{"names[1]"}, httpapitest.InvalidFields(t, err))
}

// Deleting a label hides it at once and removes it from every subscriber in the background;
// until then, it is filtered out of every response.
func TestDeleteLabelRemovesItFromSubscribers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	vip := f.label(t, "VIP")
	keep := f.label(t, "Keep")
	var subs []Subscriber
	for i := range 250 {
		s := f.subscriber(t, fmt.Sprint(1000+i), "Person", fmt.Sprint(i))
		if i%2 == 0 {
			_, err := f.svc.AddLabel(t.Context(), f.bot, s.ID, vip.ID)
			require.NoError(t, err)
		}
		s, err := f.svc.AddLabel(t.Context(), f.bot, s.ID, keep.ID)
		require.NoError(t, err)
		subs = append(subs, s)
	}

	// A stale expected_revision refuses the deletion.
	err := f.svc.DeleteLabel(t.Context(), f.bot, vip.ID, ptr(int64(2)))
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	require.NoError(t, f.svc.DeleteLabel(t.Context(), f.bot, vip.ID, ptr(int64(1))))

	// Meanwhile: gone from lists and filters, from every subscriber, and cannot be added.
	_, err = f.svc.GetLabel(t.Context(), f.bot, vip.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	s0, err := f.svc.Get(t.Context(), f.bot, subs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, []string{keep.ID}, s0.Labels)
	assert.Equal(t, subs[0].Revision, s0.Revision, "not rewritten yet")
	page, _, err := f.svc.List(t.Context(), f.bot, Filter{Label: vip.ID}, 50, "")
	require.NoError(t, err)
	assert.Empty(t, page)
	_, err = f.svc.AddLabel(t.Context(), f.bot, subs[1].ID, vip.ID)
	assert.Equal(t, []string{"label_id"}, httpapitest.InvalidFields(t, err))
	assert.Len(t, f.partition(t, memberPartition(f.bot, vip.ID)), 125, "memberships remain until the job runs")
	// A repeat while the job has not run answers success and starts it again.
	require.NoError(t, f.svc.DeleteLabel(t.Context(), f.bot, vip.ID, nil))

	steps := f.jobs.runAll(t, f.svc)
	assert.GreaterOrEqual(t, steps, 2, "more than one batch")
	assert.Empty(t, f.partition(t, memberPartition(f.bot, vip.ID)))
	marker, err := f.svc.goneMarker(t.Context(), f.bot, vip.ID)
	require.NoError(t, err)
	assert.True(t, marker.Done, "the marker lingers, done")
	f.clock.Advance(goneLinger)
	assert.Empty(t, f.partition(t, labelGonePartition(f.bot)), "then expires")
	s0, err = f.svc.Get(t.Context(), f.bot, subs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, []string{keep.ID}, s0.Labels)
	assert.Equal(t, subs[0].Revision+1, s0.Revision, "the removal is a change")
	s1, err := f.svc.Get(t.Context(), f.bot, subs[1].ID)
	require.NoError(t, err)
	assert.Equal(t, subs[1].Revision, s1.Revision, "a subscriber without the label is untouched")
	raw, err := f.svc.load(t.Context(), f.bot, subs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, []string{keep.ID}, raw.Labels, "the stored record no longer holds it")
	assert.Len(t, f.partition(t, memberPartition(f.bot, keep.ID)), 250)

	err = f.svc.DeleteLabel(t.Context(), f.bot, vip.ID, nil)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code, "once the removal is done, the label is simply unknown")
	// The name is free for a new label, which starts empty.
	again := f.label(t, "vip")
	assert.NotEqual(t, vip.ID, again.ID)
	page, _, err = f.svc.List(t.Context(), f.bot, Filter{Label: again.ID}, 50, "")
	require.NoError(t, err)
	assert.Empty(t, page)
}

func TestDeleteLabelInlineWithoutRunner(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	l := f.label(t, "Inline")
	s := f.subscriber(t, "1", "A", "B")
	_, err := f.svc.AddLabel(t.Context(), f.bot, s.ID, l.ID)
	require.NoError(t, err)
	require.NoError(t, f.svc.DeleteLabel(t.Context(), f.bot, l.ID, nil))
	assert.Empty(t, f.partition(t, memberPartition(f.bot, l.ID)))
	raw, err := f.svc.load(t.Context(), f.bot, s.ID)
	require.NoError(t, err)
	assert.Empty(t, raw.Labels)
	assert.Equal(t, "not_found", httpapitest.AsError(t, f.svc.DeleteLabel(t.Context(), f.bot, "lbl_x", nil)).Code)
}
