package collections

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
)

func TestValues(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	tests := []struct {
		name   string
		values string
		want   string // canonical values on success
		bad    []string
	}{
		{"required only", `{"sku":"A"}`, `{"sku":"A"}`, nil},
		{"every type", `{"sku":"A","price":12.50,"in_stock":true,"launched_at":"2026-05-01T11:30:00+02:00","tags":["x","y"]}`,
			`{"sku":"A","price":12.5,"in_stock":true,"launched_at":"2026-05-01T09:30:00Z","tags":["x","y"]}`, nil},
		{"minus zero is zero", `{"sku":"A","price":-0}`, `{"sku":"A","price":0}`, nil},
		{"exponent", `{"sku":"A","price":1e3}`, `{"sku":"A","price":1000}`, nil},
		{"fractional seconds kept", `{"sku":"A","launched_at":"2026-05-01T09:30:00.250Z"}`, `{"sku":"A","launched_at":"2026-05-01T09:30:00.25Z"}`, nil},
		{"null is absent", `{"sku":"A","price":null}`, `{"sku":"A"}`, nil},
		{"empty list", `{"sku":"A","tags":[]}`, `{"sku":"A","tags":[]}`, nil},
		{"200-character indexed string", `{"sku":"` + strings.Repeat("é", 200) + `"}`, `{"sku":"` + strings.Repeat("é", 200) + `"}`, nil},
		{"missing required", `{}`, "", []string{"values.sku"}},
		{"null required", `{"sku":null}`, "", []string{"values.sku"}},
		{"unknown field", `{"sku":"A","colour":"red"}`, "", []string{"values.colour"}},
		{"string for number", `{"sku":"A","price":"12"}`, "", []string{"values.price"}},
		{"number for string", `{"sku":7}`, "", []string{"values.sku"}},
		{"number too large", `{"sku":"A","price":1e400}`, "", []string{"values.price"}},
		{"boolean as string", `{"sku":"A","in_stock":"true"}`, "", []string{"values.in_stock"}},
		{"date without time", `{"sku":"A","launched_at":"2026-05-01"}`, "", []string{"values.launched_at"}},
		{"list of numbers", `{"sku":"A","tags":[1]}`, "", []string{"values.tags"}},
		{"list too long", `{"sku":"A","tags":[` + strings.TrimSuffix(strings.Repeat(`"t",`, MaxListItems+1), ",") + `]}`, "", []string{"values.tags"}},
		{"201-character indexed string", `{"sku":"` + strings.Repeat("a", 201) + `"}`, "", []string{"values.sku"}},
		{"every problem at once", `{"price":"x","colour":1}`, "", []string{"values.sku", "values.price", "values.colour"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(tt.values), &in))
			r, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, in)
			if tt.bad != nil {
				assert.ElementsMatch(t, tt.bad, httpapitest.InvalidFields(t, err))
				return
			}
			require.NoError(t, err)
			got, err := json.Marshal(r.Values)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(got))
		})
	}
}

func TestRecordSizeLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, err := f.svc.CreateCollection(t.Context(), f.bot, "Docs", []FieldInput{field("a", "string", false, false), field("b", "string", false, false), field("c", "string", false, false), field("d", "string", false, false)})
	require.NoError(t, err)
	big := strings.Repeat("x", MaxStringLen)
	_, err = f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "a", big, "b", big, "c", big))
	require.NoError(t, err, "30 KB fits")
	_, err = f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "a", big, "b", big, "c", big, "d", big))
	assert.Equal(t, []string{"values"}, httpapitest.InvalidFields(t, err))
}

func TestRecordLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	ctx := t.Context()

	r, err := f.svc.CreateRecord(ctx, f.bot, c.ID, ptr("sku-1"), vals(t, "sku", "A-1", "price", 10, "tags", []string{"new"}))
	require.NoError(t, err)
	assert.True(t, ids.Valid("rec", r.ID))
	assert.Equal(t, c.ID, r.CollectionID)
	assert.Equal(t, "sku-1", *r.ExternalKey)
	assert.Equal(t, int64(1), r.Revision)
	assert.Equal(t, t0, r.CreatedAt)

	got, err := f.svc.GetRecord(ctx, f.bot, c.ID, r.ID)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	// PATCH merges: a value replaces, null clears, absent keeps.
	f.clock.Advance(time.Minute)
	up, err := f.svc.UpdateRecord(ctx, f.bot, c.ID, r.ID, 1, nil, vals(t, "price", 12, "tags", nil))
	require.NoError(t, err)
	assert.Equal(t, vals(t, "sku", "A-1", "price", 12), up.Values)
	assert.Equal(t, int64(2), up.Revision)
	assert.Equal(t, t0.Add(time.Minute), up.UpdatedAt)
	assert.Equal(t, t0, up.CreatedAt)

	same, err := f.svc.UpdateRecord(ctx, f.bot, c.ID, r.ID, 2, ptr("sku-1"), vals(t, "price", 12))
	require.NoError(t, err)
	assert.Equal(t, int64(2), same.Revision, "nothing changed, no new revision")

	_, err = f.svc.UpdateRecord(ctx, f.bot, c.ID, r.ID, 1, nil, vals(t, "price", 13))
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "stale_revision", he.Code)
	assert.Equal(t, int64(2), he.Extensions["current_revision"])
	_, err = f.svc.UpdateRecord(ctx, f.bot, c.ID, r.ID, 2, nil, vals(t, "sku", nil))
	assert.Equal(t, []string{"values.sku"}, httpapitest.InvalidFields(t, err), "a required value cannot be cleared")

	// External keys are unique in the collection; a key can move to another record once freed.
	r2, err := f.svc.CreateRecord(ctx, f.bot, c.ID, nil, vals(t, "sku", "B-2"))
	require.NoError(t, err)
	_, err = f.svc.CreateRecord(ctx, f.bot, c.ID, ptr("sku-1"), vals(t, "sku", "C"))
	he = httpapitest.AsError(t, err)
	assert.Equal(t, "duplicate_external_key", he.Code)
	assert.Equal(t, r.ID, he.Extensions["record_id"])
	_, err = f.svc.UpdateRecord(ctx, f.bot, c.ID, r2.ID, 1, ptr("sku-1"), nil)
	assert.Equal(t, "duplicate_external_key", httpapitest.AsError(t, err).Code)
	_, err = f.svc.UpdateRecord(ctx, f.bot, c.ID, r.ID, 2, ptr("sku-1b"), nil)
	require.NoError(t, err)
	moved, err := f.svc.UpdateRecord(ctx, f.bot, c.ID, r2.ID, 1, ptr("sku-1"), nil)
	require.NoError(t, err)
	assert.Equal(t, "sku-1", *moved.ExternalKey)
	_, err = f.svc.CreateRecord(ctx, f.bot, c.ID, ptr(""), vals(t, "sku", "x"))
	assert.Equal(t, []string{"external_key"}, httpapitest.InvalidFields(t, err))
	_, err = f.svc.CreateRecord(ctx, f.bot, c.ID, ptr("a\nb"), vals(t, "sku", "x"))
	assert.Equal(t, []string{"external_key"}, httpapitest.InvalidFields(t, err))

	count := func() int64 {
		got, err := f.svc.GetCollection(ctx, f.bot, c.ID)
		require.NoError(t, err)
		return got.RecordCount
	}
	assert.Equal(t, int64(2), count())

	assert.Equal(t, "stale_revision", httpapitest.AsError(t, f.svc.DeleteRecord(ctx, f.bot, c.ID, r.ID, ptr(int64(1)))).Code)
	require.NoError(t, f.svc.DeleteRecord(ctx, f.bot, c.ID, r.ID, ptr(int64(3))))
	assert.Equal(t, "not_found", httpapitest.AsError(t, f.svc.DeleteRecord(ctx, f.bot, c.ID, r.ID, nil)).Code)
	_, err = f.svc.GetRecord(ctx, f.bot, c.ID, r.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	assert.Equal(t, int64(1), count())
	// Its key and index entries went with it.
	_, err = f.svc.CreateRecord(ctx, f.bot, c.ID, ptr("sku-1b"), vals(t, "sku", "D"))
	require.NoError(t, err)
	assert.Empty(t, f.list(t, c.ID, Filter{Field: "sku", Value: "A-1", Param: "filter[sku]"}))

	for _, id := range []string{"nope", "rec_00000000000000000000000000", "col_" + r.ID[4:]} {
		_, err = f.svc.GetRecord(ctx, f.bot, c.ID, id)
		assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code, id)
	}
	_, err = f.svc.GetRecord(ctx, f.bot, "col_00000000000000000000000000", r2.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	_, err = f.svc.GetRecord(ctx, ids.At("bot", t0), c.ID, r2.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code, "another bot's path finds nothing")
}

func TestRecordLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc.maxRecords = 3
	c := f.products(t)
	var last Record
	for i := range 3 {
		var err error
		last, err = f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", fmt.Sprint(i)))
		require.NoError(t, err)
	}
	_, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", "x"))
	assert.Equal(t, "limit_reached", httpapitest.AsError(t, err).Code)
	_, err = f.svc.Batch(t.Context(), f.bot, c.ID, []BatchEntry{{Values: vals(t, "sku", "y")}})
	assert.Equal(t, "limit_reached", httpapitest.AsError(t, err).Code)
	require.NoError(t, f.svc.DeleteRecord(t.Context(), f.bot, c.ID, last.ID, nil))
	_, err = f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", "x"))
	require.NoError(t, err)
}

// Concurrent creates never pass the limit, and the count stays exact.
func TestConcurrentCreatesKeepTheCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.svc.maxRecords = 10
	c := f.products(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", fmt.Sprint(i)))
			code := "ok"
			if err != nil {
				code = httpapitest.AsError(t, err).Code
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"ok": 10, "limit_reached": 6}, codes)
	got, err := f.svc.GetCollection(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(10), got.RecordCount)
	assert.Len(t, f.list(t, c.ID), 10)
}

// Two writers with the same expected revision: exactly one wins.
func TestConcurrentPatchOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	r, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", "A"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.svc.UpdateRecord(t.Context(), f.bot, c.ID, r.ID, 1, nil, vals(t, "price", i))
			code := "ok"
			if err != nil {
				code = httpapitest.AsError(t, err).Code
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Equal(t, map[string]int{"ok": 1, "stale_revision": 7}, codes)
}

func TestFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	ctx := t.Context()
	mk := func(kv ...any) string {
		f.clock.Advance(time.Second) // ids sort by creation time
		r, err := f.svc.CreateRecord(ctx, f.bot, c.ID, nil, vals(t, kv...))
		require.NoError(t, err)
		return r.ID
	}
	hash := mk("sku", "50% off #1", "price", 10, "in_stock", true)
	ten := mk("sku", "B", "price", 10.0, "in_stock", false)
	tenToo := mk("sku", "C", "price", 1e1, "in_stock", true)
	pct := mk("sku", "50%25 off %231", "price", 0)
	negZero := mk("sku", "D", "price", -0.0)
	mk("sku", "E")

	flt := func(name, value string) Filter {
		return Filter{Field: name, Value: value, Param: "filter[" + name + "]"}
	}
	tests := []struct {
		name    string
		filters []Filter
		want    []string
	}{
		{"escaped characters match exactly", []Filter{flt("sku", "50% off #1")}, []string{hash}},
		{"escapes are not wildcards", []Filter{flt("sku", "50%25 off %231")}, []string{pct}},
		{"prefix is not equality", []Filter{flt("sku", "50")}, nil},
		{"numbers compare as numbers", []Filter{flt("price", "10.00")}, []string{hash, ten, tenToo}},
		{"exponent", []Filter{flt("price", "1e1")}, []string{hash, ten, tenToo}},
		{"zero and minus zero", []Filter{flt("price", "-0")}, []string{pct, negZero}},
		{"boolean", []Filter{flt("in_stock", "true")}, []string{hash, tenToo}},
		{"two filters", []Filter{flt("in_stock", "true"), flt("price", "10")}, []string{hash, tenToo}},
		{"two filters, the other order", []Filter{flt("price", "10"), flt("in_stock", "true")}, []string{hash, tenToo}},
		{"no match", []Filter{flt("sku", "Z")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, nilIfEmpty(recordIDs(f.list(t, c.ID, tt.filters...))))
		})
	}

	// The index follows updates and deletes.
	_, err := f.svc.UpdateRecord(ctx, f.bot, c.ID, ten, 1, nil, vals(t, "price", 11))
	require.NoError(t, err)
	require.NoError(t, f.svc.DeleteRecord(ctx, f.bot, c.ID, hash, nil))
	assert.Equal(t, []string{tenToo}, recordIDs(f.list(t, c.ID, flt("price", "10"))))
	assert.Equal(t, []string{ten}, recordIDs(f.list(t, c.ID, flt("price", "11"))))

	bad := []struct {
		name   string
		filter Filter
	}{
		{"unknown field", flt("colour", "red")},
		{"not indexed", flt("launched_at", "2026-01-01T00:00:00Z")},
		{"not a number", flt("price", "ten")},
		{"infinite", flt("price", "1e999")},
		{"not a boolean", flt("in_stock", "yes")},
		{"too long", flt("sku", strings.Repeat("a", 201))},
	}
	for _, b := range bad {
		_, _, err := f.svc.ListRecords(ctx, f.bot, c.ID, []Filter{b.filter}, 10, "")
		he := httpapitest.AsError(t, err)
		assert.Equal(t, "invalid_parameter", he.Code, b.name)
		assert.Equal(t, b.filter.Param, he.Extensions["parameter"], b.name)
	}
}

func TestDatetimeFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, err := f.svc.CreateCollection(t.Context(), f.bot, "Slots", []FieldInput{field("starts_at", "datetime", true, true)})
	require.NoError(t, err)
	r, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "starts_at", "2026-05-01T11:30:00+02:00"))
	require.NoError(t, err)
	got := f.list(t, c.ID, Filter{Field: "starts_at", Value: "2026-05-01T09:30:00Z", Param: "filter[starts_at]"})
	assert.Equal(t, []string{r.ID}, recordIDs(got), "the same instant in another offset")
	assert.Empty(t, f.list(t, c.ID, Filter{Field: "starts_at", Value: "2026-05-01T09:30:01Z", Param: "filter[starts_at]"}))
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	var want, berlin []string
	for i := range 10 {
		f.clock.Advance(time.Second)
		city := "Paris"
		if i%3 == 0 {
			city = "Berlin"
		}
		r, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, nil, vals(t, "sku", city))
		require.NoError(t, err)
		want = append(want, r.ID)
		if city == "Berlin" {
			berlin = append(berlin, r.ID)
		}
	}
	assert.Equal(t, want, recordIDs(f.list(t, c.ID)), "oldest first across pages of 3")
	assert.Equal(t, berlin, recordIDs(f.list(t, c.ID, Filter{Field: "sku", Value: "Berlin", Param: "filter[sku]"})))
	page, next, err := f.svc.ListRecords(t.Context(), f.bot, c.ID, nil, 10, "")
	require.NoError(t, err)
	assert.Len(t, page, 10)
	assert.Empty(t, next, "no cursor after the last page")
}
