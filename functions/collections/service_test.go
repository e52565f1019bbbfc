package collections

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
)

func TestCreateCollectionValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	many := func(n int, indexed bool) []FieldInput {
		var out []FieldInput
		for i := range n {
			out = append(out, field(fmt.Sprintf("f_%d", i), "string", false, indexed))
		}
		return out
	}
	tests := []struct {
		name     string
		colName  string
		fields   []FieldInput
		problems []string // nil: created
	}{
		{"one field", "a", []FieldInput{field("title", "string", false, false)}, nil},
		{"every type", "b", []FieldInput{field("s", "string", true, true), field("n", "number", false, true), field("b", "boolean", false, true), field("d", "datetime", false, true), field("l", "string_list", false, false)}, nil},
		{"50 fields", "c", many(MaxFields, false), nil},
		{"5 indexed", "d", many(MaxIndexedFields, true), nil},
		{"64-character name", "e", []FieldInput{field("a"+strings.Repeat("b", 63), "string", false, false)}, nil},
		{"name trimmed to nothing", "  ", []FieldInput{field("x", "string", false, false)}, []string{"name"}},
		{"101-character name", strings.Repeat("n", 101), []FieldInput{field("x", "string", false, false)}, []string{"name"}},
		{"no fields", "f", nil, []string{"fields"}},
		{"51 fields", "g", many(MaxFields+1, false), []string{"fields"}},
		{"6 indexed", "h", many(MaxIndexedFields+1, true), []string{"fields"}},
		{"65-character field name", "i", []FieldInput{field("a"+strings.Repeat("b", 64), "string", false, false)}, []string{"fields[0].name"}},
		{"camelCase", "j", []FieldInput{field("firstName", "string", false, false)}, []string{"fields[0].name"}},
		{"leading digit", "k", []FieldInput{field("1st", "string", false, false)}, []string{"fields[0].name"}},
		{"leading underscore", "l", []FieldInput{field("_x", "string", false, false)}, []string{"fields[0].name"}},
		{"missing name and type", "m", []FieldInput{{}}, []string{"fields[0].name", "fields[0].type"}},
		{"unknown type", "n", []FieldInput{field("x", "integer", false, false)}, []string{"fields[0].type"}},
		{"indexed list", "o", []FieldInput{field("x", "string_list", false, true)}, []string{"fields[0].indexed"}},
		{"duplicate field", "p", []FieldInput{field("x", "string", false, false), field("x", "number", false, false)}, []string{"fields[1].name"}},
		{"every problem at once", "", []FieldInput{field("X", "str", false, false)}, []string{"name", "fields[0].name", "fields[0].type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := f.svc.CreateCollection(t.Context(), f.bot, tt.colName, tt.fields)
			if tt.problems == nil {
				require.NoError(t, err)
				assert.True(t, ids.Valid("col", c.ID))
				assert.Equal(t, int64(1), c.Revision)
				assert.Equal(t, int64(0), c.RecordCount)
				assert.Len(t, c.Fields, len(tt.fields))
				return
			}
			require.Error(t, err)
			assert.ElementsMatch(t, tt.problems, httpapitest.InvalidFields(t, err))
		})
	}
}

func TestCollectionNamesAndLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	one := []FieldInput{field("x", "string", false, false)}
	c, err := f.svc.CreateCollection(t.Context(), f.bot, "  FAQ  ", one)
	require.NoError(t, err)
	assert.Equal(t, "FAQ", c.Name, "trimmed")
	_, err = f.svc.CreateCollection(t.Context(), f.bot, "faq", one)
	assert.Equal(t, "name_taken", httpapitest.AsError(t, err).Code, "names are unique ignoring case")
	// Another bot may use the name.
	_, err = f.svc.CreateCollection(t.Context(), ids.At("bot", t0), "FAQ", one)
	require.NoError(t, err)

	for i := 1; i < MaxCollectionsPerBot; i++ {
		f.clock.Advance(time.Second) // ids sort by creation time
		_, err := f.svc.CreateCollection(t.Context(), f.bot, fmt.Sprintf("c%d", i), one)
		require.NoError(t, err)
	}
	_, err = f.svc.CreateCollection(t.Context(), f.bot, "one too many", one)
	assert.Equal(t, "limit_reached", httpapitest.AsError(t, err).Code)
	// Deleting one makes room, and frees its name.
	require.NoError(t, f.svc.DeleteCollection(t.Context(), f.bot, c.ID, nil, false))
	f.clock.Advance(time.Second)
	_, err = f.svc.CreateCollection(t.Context(), f.bot, "faq", one)
	require.NoError(t, err)

	// Oldest first, every page bounded.
	var all []Collection
	cursor := ""
	for {
		page, next, err := f.svc.ListCollections(t.Context(), f.bot, 7, cursor)
		require.NoError(t, err)
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, all, MaxCollectionsPerBot)
	assert.Equal(t, "c1", all[0].Name)
	assert.Equal(t, "faq", all[len(all)-1].Name)
}

func TestUpdateCollectionSchemaRules(t *testing.T) {
	t.Parallel()
	base := func(t *testing.T) (*fixture, Collection) {
		f := newFixture(t)
		c, err := f.svc.CreateCollection(t.Context(), f.bot, "Bookings", []FieldInput{
			field("guest", "string", true, true),
			field("nights", "number", false, false),
			field("notes", "string", false, false),
		})
		require.NoError(t, err)
		return f, c
	}
	keep := func(extra ...FieldInput) []FieldInput {
		return append([]FieldInput{{Name: ptr("guest")}, {Name: ptr("nights")}, {Name: ptr("notes")}}, extra...)
	}
	tests := []struct {
		name     string
		fields   []FieldInput
		problems []string
		want     []Field // on success
	}{
		{"add an optional indexed field", keep(field("city", "string", false, true)), nil,
			[]Field{{"guest", TypeString, true, true}, {"nights", TypeNumber, false, false}, {"notes", TypeString, false, false}, {"city", TypeString, false, true}}},
		{"reorder and remove", []FieldInput{{Name: ptr("notes")}, {Name: ptr("guest")}}, nil,
			[]Field{{"notes", TypeString, false, false}, {"guest", TypeString, true, true}}},
		{"relax required", []FieldInput{{Name: ptr("guest"), Required: ptr(false)}, {Name: ptr("nights")}, {Name: ptr("notes")}}, nil,
			[]Field{{"guest", TypeString, false, true}, {"nights", TypeNumber, false, false}, {"notes", TypeString, false, false}}},
		{"restate a field unchanged", []FieldInput{field("guest", "string", true, true), {Name: ptr("nights")}}, nil,
			[]Field{{"guest", TypeString, true, true}, {"nights", TypeNumber, false, false}}},
		{"add a required field", keep(field("city", "string", true, false)), []string{"fields[3].required"}, nil},
		{"change a type", []FieldInput{{Name: ptr("guest")}, {Name: ptr("nights"), Type: ptr("string")}, {Name: ptr("notes")}}, []string{"fields[1].type"}, nil},
		{"index an existing field", []FieldInput{{Name: ptr("guest")}, {Name: ptr("nights"), Indexed: ptr(true)}, {Name: ptr("notes")}}, []string{"fields[1].indexed"}, nil},
		{"unindex an existing field", []FieldInput{{Name: ptr("guest"), Indexed: ptr(false)}, {Name: ptr("nights")}, {Name: ptr("notes")}}, []string{"fields[0].indexed"}, nil},
		{"make a field required", []FieldInput{{Name: ptr("guest")}, {Name: ptr("nights"), Required: ptr(true)}, {Name: ptr("notes")}}, []string{"fields[1].required"}, nil},
		{"empty list", []FieldInput{}, []string{"fields"}, nil},
		{"entry without a name", keep(FieldInput{Type: ptr("string")}), []string{"fields[3].name"}, nil},
		{"listed twice", keep(FieldInput{Name: ptr("notes")}), []string{"fields[3].name"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := base(t)
			got, err := f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 1, nil, &tt.fields)
			if tt.problems != nil {
				assert.ElementsMatch(t, tt.problems, httpapitest.InvalidFields(t, err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Fields)
			assert.Equal(t, int64(2), got.Revision)
		})
	}
}

func TestUpdateCollection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	other, err := f.svc.CreateCollection(t.Context(), f.bot, "Other", []FieldInput{field("x", "string", false, false)})
	require.NoError(t, err)

	// Nothing changes: no new revision.
	same, err := f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 1, ptr("Products"), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), same.Revision)

	_, err = f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 1, ptr("other"), nil)
	assert.Equal(t, "name_taken", httpapitest.AsError(t, err).Code)
	_, err = f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 7, ptr("x"), nil)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "stale_revision", he.Code)
	assert.Equal(t, int64(1), he.Extensions["current_revision"])
	_, err = f.svc.UpdateCollection(t.Context(), f.bot, "col_nope", 1, ptr("x"), nil)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)

	// A case-only rename keeps the name claim; the old name of a real rename is freed.
	up, err := f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 1, ptr("PRODUCTS"), nil)
	require.NoError(t, err)
	assert.Equal(t, "PRODUCTS", up.Name)
	up, err = f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 2, ptr("Catalog"), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(3), up.Revision)
	_, err = f.svc.UpdateCollection(t.Context(), f.bot, other.ID, 1, ptr("products"), nil)
	require.NoError(t, err)
	_, err = f.svc.CreateCollection(t.Context(), f.bot, "catalog", []FieldInput{field("x", "string", false, false)})
	assert.Equal(t, "name_taken", httpapitest.AsError(t, err).Code)
}

// A removed field's values disappear at once; a new field of the same name starts empty,
// even with another type; the removed field's index entries are purged by a job.
func TestRemovedFieldNeverComesBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	r, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", "A-1", "price", 10))
	require.NoError(t, err)
	require.Equal(t, 1, f.items(t, indexPK(f.bot, c.ID, "f2")))

	fields := []FieldInput{{Name: ptr("sku")}}
	c, err = f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 1, nil, &fields)
	require.NoError(t, err)
	got, err := f.svc.GetRecord(t.Context(), f.bot, c.ID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, vals(t, "sku", "A-1"), got.Values)

	fields = []FieldInput{{Name: ptr("sku")}, field("price", "string", false, true)}
	c, err = f.svc.UpdateCollection(t.Context(), f.bot, c.ID, 2, nil, &fields)
	require.NoError(t, err)
	got, err = f.svc.GetRecord(t.Context(), f.bot, c.ID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, vals(t, "sku", "A-1"), got.Values)
	assert.Empty(t, f.list(t, c.ID, Filter{Field: "price", Value: "10", Param: "filter[price]"}))

	// The first removal started a purge of f2 (price) and f3 (in_stock, indexed).
	started := f.jobs.jobs()
	require.Len(t, started, 1)
	runJob(t, f.svc, started[0])
	assert.Zero(t, f.items(t, indexPK(f.bot, c.ID, "f2")))
	assert.Equal(t, 1, f.items(t, indexPK(f.bot, c.ID, "f1")), "kept fields keep their entries")
}

// runJob runs a purge job to the end, as the queue runner would.
func runJob(t *testing.T, svc *Service, payload json.RawMessage) {
	t.Helper()
	reg := jobs.NewRegistry()
	reg.Register(PurgeJob, svc.PurgeStep)
	st := jobs.State{Kind: PurgeJob, Payload: payload}
	for !st.Done {
		var err error
		st, err = reg.RunStep(t.Context(), st)
		require.NoError(t, err)
		require.Less(t, st.Steps, 1000)
	}
}

func TestDeleteCollection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	for i := range 150 {
		_, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, ptr(fmt.Sprintf("k%d", i)), vals(t, "sku", fmt.Sprintf("S-%d", i), "price", i))
		require.NoError(t, err)
	}
	got, err := f.svc.GetCollection(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(150), got.RecordCount)

	err = f.svc.DeleteCollection(t.Context(), f.bot, c.ID, nil, false)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "collection_not_empty", he.Code)
	assert.Equal(t, int64(150), he.Extensions["record_count"])
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, f.svc.DeleteCollection(t.Context(), f.bot, c.ID, ptr(int64(2)), true)).Code)
	assert.Empty(t, f.jobs.jobs(), "nothing deleted, nothing to purge")

	require.NoError(t, f.svc.DeleteCollection(t.Context(), f.bot, c.ID, ptr(int64(1)), true))
	_, err = f.svc.GetCollection(t.Context(), f.bot, c.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	_, _, err = f.svc.ListRecords(t.Context(), f.bot, c.ID, nil, 10, "")
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code, "its records are gone at once for clients")
	_, err = f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", "late"))
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)

	// Until the purge has run, DELETE again restarts it (a client may retry after a
	// failure to queue it); afterwards the collection is simply not found.
	require.NoError(t, f.svc.DeleteCollection(t.Context(), f.bot, c.ID, nil, false))
	started := f.jobs.jobs()
	require.Len(t, started, 2)
	assert.JSONEq(t, string(started[0]), string(started[1]))
	assert.Equal(t, 150, f.items(t, recordsPK(f.bot, c.ID)))
	runJob(t, f.svc, started[0])
	for _, pk := range []string{recordsPK(f.bot, c.ID), externalPK(f.bot, c.ID), indexPK(f.bot, c.ID, "f1"), indexPK(f.bot, c.ID, "f2")} {
		assert.Zero(t, f.items(t, pk), pk)
	}
	assert.Equal(t, "not_found", httpapitest.AsError(t, f.svc.DeleteCollection(t.Context(), f.bot, c.ID, nil, false)).Code)
	runJob(t, f.svc, started[1]) // a repeated job finds nothing to do
	page, _, err := f.svc.ListCollections(t.Context(), f.bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, page)

	// An empty collection needs no force.
	e, err := f.svc.CreateCollection(t.Context(), f.bot, "Empty", []FieldInput{field("x", "string", false, false)})
	require.NoError(t, err)
	require.NoError(t, f.svc.DeleteCollection(t.Context(), f.bot, e.ID, nil, false))
}

func TestDeleteCollectionNeedsAJobRunner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	svc := NewService(f.store, nil, f.clock.Now, nil)
	require.Error(t, svc.DeleteCollection(t.Context(), f.bot, c.ID, nil, true))
	_, err := svc.GetCollection(t.Context(), f.bot, c.ID)
	require.NoError(t, err, "refused before changing anything")
}
