package experiments

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func TestCreateDefaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.definition()
	in.Salt = nil
	e := f.create(t, in)
	assert.Equal(t, Draft, e.Status)
	assert.Equal(t, int64(1), e.Revision)
	assert.Equal(t, int64(0), e.Version, "a draft has no version")
	assert.Equal(t, "a", e.ControlVariantID, "the first variant is the control by default")
	assert.Len(t, e.Salt, 16, "a random salt")
	assert.Equal(t, []Filter{}, e.Goal.Filters)
	assert.Nil(t, e.Hypothesis)
	assert.Nil(t, e.WinnerVariantID)
	got, err := f.svc.Get(t.Context(), f.bot, e.ID)
	require.NoError(t, err)
	assert.Equal(t, e, got)
	other := f.create(t, in)
	assert.NotEqual(t, e.Salt, other.Salt)
}

// Every shape problem at once, with its path.
func TestCreateValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name   string
		change func(*NewExperiment)
		fields []string
	}{
		{"no name", func(in *NewExperiment) { in.Name = " " }, []string{"name"}},
		{"one variant", func(in *NewExperiment) { in.Variants = in.Variants[:1] }, []string{"variants"}},
		{"nine variants", func(in *NewExperiment) {
			for len(in.Variants) < 9 {
				v := in.Variants[0]
				v.ID = string(rune('c' + len(in.Variants)))
				in.Variants = append(in.Variants, v)
			}
		}, []string{"variants"}},
		{"bad ids and names", func(in *NewExperiment) {
			in.Variants[0].ID = "A"
			in.Variants[1].Name = ""
			in.ControlVariantID = ptr("b")
		}, []string{"variants[0].id", "variants[1].name"}},
		{"duplicate id", func(in *NewExperiment) { in.Variants[1].ID = "a" }, []string{"variants[1].id"}},
		{"weights", func(in *NewExperiment) { in.Variants[0].Weight = -1; in.Variants[1].Weight = MaxWeight + 1 },
			[]string{"variants[0].weight", "variants[1].weight", "variants"}},
		{"all zero", func(in *NewExperiment) { in.Variants[0].Weight = 0; in.Variants[1].Weight = 0 }, []string{"variants", "control_variant_id"}},
		{"control zero", func(in *NewExperiment) { in.Variants[0].Weight = 0 }, []string{"control_variant_id"}},
		{"unknown control", func(in *NewExperiment) { in.ControlVariantID = ptr("zz") }, []string{"control_variant_id"}},
		{"subject type", func(in *NewExperiment) { in.Variants[0].Subject = Subject{Type: "flow"} }, []string{"variants[0].subject.type"}},
		{"subject members", func(in *NewExperiment) {
			in.Variants[0].Subject = Subject{Type: SubjectReactionVersion, ReactionID: ptr("rct_1"), PopupID: ptr("pop_1")}
			in.Variants[1].Subject = Subject{Type: SubjectContent, DocumentID: ptr("not an id"), Version: ptr(int64(0))}
		}, []string{"variants[0].subject.version", "variants[0].subject.popup_id", "variants[1].subject.document_id", "variants[1].subject.version"}},
		{"popup without id", func(in *NewExperiment) { in.Variants[0].Subject = Subject{Type: SubjectPopup, Version: ptr(int64(2))} },
			[]string{"variants[0].subject.popup_id", "variants[0].subject.version"}},
		{"no goal", func(in *NewExperiment) { in.Goal = nil }, []string{"goal", "goal.event"}},
		{"goal is the exposure", func(in *NewExperiment) { in.Goal = &Goal{Event: ExposureEvent} }, []string{"goal.event"}},
		{"goal filters", func(in *NewExperiment) {
			in.Goal = &Goal{Event: "Purchase!", Filters: []Filter{
				{Property: "", Op: OpEq, Value: "x"},
				{Property: "plan", Op: "like", Value: "x"},
				{Property: "total", Op: OpGt, Value: "10"},
				{Property: "sku", Op: OpContains, Value: 3.0},
				{Property: "x", Op: OpEq, Value: nil},
				{Property: "y", Op: OpEq, Value: map[string]any{}},
			}}
		}, []string{"goal.event", "goal.filters[0].property", "goal.filters[1].op", "goal.filters[2].value", "goal.filters[3].value", "goal.filters[4].value", "goal.filters[5].value"}},
		{"salt", func(in *NewExperiment) { in.Salt = ptr("has space") }, []string{"salt"}},
		{"hypothesis", func(in *NewExperiment) { in.Hypothesis = ptr(string(make([]byte, MaxHypothesisLen+1))) }, []string{"hypothesis"}},
	}
	for _, tc := range tests {
		in := f.definition()
		tc.change(&in)
		_, err := f.svc.Create(t.Context(), f.bot, in)
		assert.Equal(t, tc.fields, httpapitest.InvalidFields(t, err), tc.name)
	}
	page, err := f.raw.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: experimentsPK(f.bot)})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "nothing was stored")
}

func TestCreateUnknownSubjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	in := f.definition()
	in.Variants[1].Subject = Subject{Type: SubjectReactionVersion, ReactionID: ptr("rct_1"), Version: ptr(int64(3))}
	_, err := f.svc.Create(t.Context(), f.bot, in)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "unknown_subject", he.Code)
	assert.Equal(t, 422, he.Status())
	assert.Equal(t, []httpapi.FieldError{{Field: "variants[1].subject", Message: "no such reaction_version"}}, he.Extensions["errors"])

	f.subjects.known["rct_1#3"] = true
	e := f.create(t, in)
	assert.Equal(t, "rct_1", *e.Variants[1].Subject.ReactionID)
}

func TestCreateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := sqlitetest.Unrecorded(t.Context())
	_, err := f.raw.Add(ctx, countKey(f.bot), MaxExperiments, time.Time{})
	require.NoError(t, err)
	_, err = f.svc.Create(t.Context(), f.bot, f.definition())
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "limit_reached", he.Code)
	assert.Equal(t, MaxExperiments, he.Extensions["limit"])
}

// A draft changes in place; a running experiment's definition change is the next version;
// a name change is not; a completed experiment does not change.
func TestUpdateVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	e := f.create(t, f.definition())
	e, err := f.svc.Update(ctx, f.bot, e.ID, 1, Patch{Salt: ptr("salt2"), Hypothesis: ptr("Shorter copy converts better")})
	require.NoError(t, err)
	assert.Equal(t, int64(2), e.Revision)
	assert.Equal(t, int64(0), e.Version)
	assert.Equal(t, "Shorter copy converts better", *e.Hypothesis)
	same, err := f.svc.Update(ctx, f.bot, e.ID, 2, Patch{Salt: ptr("salt2")})
	require.NoError(t, err)
	assert.Equal(t, e, same, "a change that changes nothing makes no revision")
	_, err = f.svc.Update(ctx, f.bot, e.ID, 1, Patch{Name: ptr("x")})
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)

	e, err = f.svc.Transition(ctx, f.bot, e.ID, e.Revision, ActionStart)
	require.NoError(t, err)
	e, err = f.svc.Update(ctx, f.bot, e.ID, e.Revision, Patch{Name: ptr("Renamed"), Hypothesis: ptr("")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.Version, "a name is not the definition")
	assert.Nil(t, e.Hypothesis, "an empty hypothesis removes it")

	vs := e.Variants
	vs = append([]Variant(nil), vs...)
	vs[1].Weight = 150
	e, err = f.svc.Update(ctx, f.bot, e.ID, e.Revision, Patch{Variants: &vs, Goal: &Goal{Event: "signup"}})
	require.NoError(t, err)
	assert.Equal(t, int64(2), e.Version)
	assert.Equal(t, Running, e.Status)
	v2, err := f.svc.Version(ctx, f.bot, e.ID, 2)
	require.NoError(t, err)
	assert.Equal(t, 150, v2.Variants[1].Weight)
	assert.Equal(t, "signup", v2.Goal.Event)
	v1, err := f.svc.Version(ctx, f.bot, e.ID, 1)
	require.NoError(t, err)
	assert.Equal(t, 50, v1.Variants[1].Weight, "version 1 stays as it was")
	assert.Equal(t, "purchase", v1.Goal.Event)
	_, err = f.svc.Version(ctx, f.bot, e.ID, 3)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	_, err = f.svc.Version(ctx, f.bot, e.ID, 0)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	list, next, err := f.svc.Versions(ctx, f.bot, e.ID, 1, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, int64(2), list[0].Number, "newest first")
	list, next, err = f.svc.Versions(ctx, f.bot, e.ID, 1, next)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, int64(1), list[0].Number)
	assert.Empty(t, next)

	// Invalid definitions and unknown subjects are refused while running too.
	bad := append([]Variant(nil), vs...)
	bad[0].Weight = 0
	_, err = f.svc.Update(ctx, f.bot, e.ID, e.Revision, Patch{Variants: &bad})
	assert.Equal(t, []string{"control_variant_id"}, httpapitest.InvalidFields(t, err))
	f.subjects.remove(f.popA)
	_, err = f.svc.Update(ctx, f.bot, e.ID, e.Revision, Patch{Variants: &vs})
	assert.Equal(t, "unknown_subject", httpapitest.AsError(t, err).Code)

	e, err = f.svc.Transition(ctx, f.bot, e.ID, e.Revision, ActionComplete)
	require.NoError(t, err)
	_, err = f.svc.Update(ctx, f.bot, e.ID, e.Revision, Patch{Name: ptr("again")})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "experiment_not_editable", he.Code)
	assert.Equal(t, Completed, he.Extensions["state"])
}

func TestUpdateVersionLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := f.running(t)
	for i := int64(2); i <= MaxVersions+1; i++ {
		salt := "s" + time.Duration(i).String()
		next, err := f.svc.Update(t.Context(), f.bot, e.ID, e.Revision, Patch{Salt: &salt})
		if i > MaxVersions {
			he := httpapitest.AsError(t, err)
			assert.Equal(t, "limit_reached", he.Code)
			assert.Equal(t, MaxVersions, he.Extensions["limit"])
			break
		}
		require.NoError(t, err)
		require.Equal(t, i, next.Version)
		e = next
	}
}

func TestListAndDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	a := f.create(t, f.definition())
	b := f.running(t)
	all, next, err := f.svc.List(ctx, f.bot, "", 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, all, 2)
	assert.Equal(t, []string{a.ID, b.ID}, []string{all[0].ID, all[1].ID}, "oldest first")
	running, _, err := f.svc.List(ctx, f.bot, Running, 10, "")
	require.NoError(t, err)
	require.Len(t, running, 1)
	assert.Equal(t, b.ID, running[0].ID)

	// Deleting takes the versions with it and frees the slot of the limit.
	b, err = f.svc.Transition(ctx, f.bot, b.ID, b.Revision, ActionComplete)
	require.NoError(t, err)
	stale := b.Revision - 1
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, f.svc.Delete(ctx, f.bot, b.ID, &stale)).Code)
	require.NoError(t, f.svc.Delete(ctx, f.bot, b.ID, &b.Revision))
	require.NoError(t, f.svc.Delete(ctx, f.bot, a.ID, nil))
	_, err = f.svc.Get(ctx, f.bot, b.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(f.svc.Delete(ctx, f.bot, b.ID, nil)))
	page, err := f.raw.Query(sqlitetest.Unrecorded(ctx), store.Query{PK: experimentsPK(f.bot)})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "only the counter is left")
	assert.Equal(t, countKey(f.bot), page.Items[0].Key)
	assert.Equal(t, int64(0), page.Items[0].Count)
}

func TestGetUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{"nope", "exp_00000000000000000000000000"} {
		_, err := f.svc.Get(t.Context(), f.bot, id)
		assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), id)
	}
	_, _, err := f.svc.Versions(t.Context(), f.bot, "exp_00000000000000000000000000", 10, "")
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
}

// The segments family's staleness look-up: the current version, 404 once deleted.
func TestCohortRevision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := f.running(t)
	rev := CohortRevision(f.raw)
	n, err := rev(t.Context(), f.bot, e.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	_, err = f.svc.Update(t.Context(), f.bot, e.ID, e.Revision, Patch{Salt: ptr("other")})
	require.NoError(t, err)
	n, err = rev(t.Context(), f.bot, e.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	_, err = rev(t.Context(), f.bot, "exp_00000000000000000000000000")
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
}
