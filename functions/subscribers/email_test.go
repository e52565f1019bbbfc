package subscribers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
)

// A subscriber is found by the address in its email field: case aside, the oldest first, and
// never by a value that is cleared, erased with its field, or not an address.
func TestFindByEmail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	ctx := t.Context()
	notFound := func(addr string) {
		t.Helper()
		_, err := f.svc.FindByEmail(ctx, f.bot, addr)
		assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code, addr)
	}
	notFound("ann@example.org")
	email := f.field(t, "email", TypeString)
	f.field(t, "plan", TypeString)

	ann := f.subscriber(t, "1", "Ann", "")
	ann, err := f.svc.SetFields(ctx, f.bot, ann.ID, map[string]any{"email": " Ann@Example.org "})
	require.NoError(t, err)
	got, err := f.svc.FindByEmail(ctx, f.bot, "ANN@example.ORG")
	require.NoError(t, err)
	assert.Equal(t, ann.ID, got.ID)
	assert.Equal(t, ann.Revision, got.Revision)
	notFound("bo@example.org")
	notFound("not an address")

	// A second subscriber with the address (set by field id, in an upsert): the oldest wins.
	bo, created, err := f.svc.Upsert(ctx, f.bot, ChannelWeb, "visitor-1", Changes{Fields: map[string]any{email.ID: "ann@example.org"}})
	require.NoError(t, err)
	require.True(t, created)
	got, err = f.svc.FindByEmail(ctx, f.bot, "ann@example.org")
	require.NoError(t, err)
	assert.Equal(t, ann.ID, got.ID, "the oldest")

	// Changes that leave the address keep the entry; changing it moves it.
	_, err = f.svc.SetFields(ctx, f.bot, ann.ID, map[string]any{"plan": "pro"})
	require.NoError(t, err)
	got, err = f.svc.FindByEmail(ctx, f.bot, "ann@example.org")
	require.NoError(t, err)
	assert.Equal(t, ann.ID, got.ID)
	_, err = f.svc.SetFields(ctx, f.bot, ann.ID, map[string]any{"email": "ann@new.example"})
	require.NoError(t, err)
	got, err = f.svc.FindByEmail(ctx, f.bot, "ann@example.org")
	require.NoError(t, err)
	assert.Equal(t, bo.ID, got.ID, "Ann moved to another address")
	got, err = f.svc.FindByEmail(ctx, f.bot, "ann@new.example")
	require.NoError(t, err)
	assert.Equal(t, ann.ID, got.ID)

	// A value that cannot be mailed is not indexed; a cleared one neither.
	_, err = f.svc.SetFields(ctx, f.bot, ann.ID, map[string]any{"email": "Ann <ann@new.example>"})
	require.NoError(t, err)
	notFound("ann@new.example")
	_, err = f.svc.SetFields(ctx, f.bot, bo.ID, map[string]any{"email": nil})
	require.NoError(t, err)
	notFound("ann@example.org")

	// An erased subscriber leaves the index with its record.
	_, err = f.svc.SetFields(ctx, f.bot, bo.ID, map[string]any{"email": "bo@example.org"})
	require.NoError(t, err)
	got, err = f.svc.FindByEmail(ctx, f.bot, "bo@example.org")
	require.NoError(t, err)
	require.NoError(t, f.svc.Delete(ctx, f.bot, got.ID, nil))
	notFound("bo@example.org")

	// The field deleted: its values are not found at once (though still stored until the
	// erasure), nor under a new field of the same name, nor after the erasure.
	cy := f.subscriber(t, "3", "Cy", "")
	_, err = f.svc.SetFields(ctx, f.bot, cy.ID, map[string]any{"email": "cy@example.org"})
	require.NoError(t, err)
	require.NoError(t, f.svc.DeleteField(ctx, f.bot, email.ID))
	notFound("cy@example.org")
	again := f.field(t, "email", TypeString)
	notFound("cy@example.org")
	f.jobs.runAll(t, f.svc)
	notFound("cy@example.org")
	items, err := f.svc.queryAll(ctx, store.Query{Index: store.GSI2, PK: emailPartition(f.bot, "cy@example.org")})
	require.NoError(t, err)
	assert.Empty(t, items, "the erasure took the entry")
	_, err = f.svc.SetFields(ctx, f.bot, cy.ID, map[string]any{again.ID: "cy@example.org"})
	require.NoError(t, err)
	got, err = f.svc.FindByEmail(ctx, f.bot, "cy@example.org")
	require.NoError(t, err)
	assert.Equal(t, cy.ID, got.ID)
}

// A record whose email value was written before the index existed is indexed the next time
// the value is written, even when the value is the same (one new revision).
func TestFindByEmailIndexesOlderRecordsOnWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	ctx := t.Context()
	f.field(t, "email", TypeString)
	ann := f.subscriber(t, "1", "Ann", "")
	ann, err := f.svc.SetFields(ctx, f.bot, ann.ID, map[string]any{"email": "ann@example.org"})
	require.NoError(t, err)
	// Stored as before the index: no EmailField, so no entry.
	rec, err := f.svc.load(ctx, f.bot, ann.ID)
	require.NoError(t, err)
	rec.EmailField = ""
	it, err := rec.item(f.bot, rec.revision)
	require.NoError(t, err)
	require.Empty(t, it.GSI2.PK)
	require.NoError(t, f.store.Put(ctx, it, store.RevisionIs(rec.revision)))
	_, err = f.svc.FindByEmail(ctx, f.bot, "ann@example.org")
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)

	again, err := f.svc.SetFields(ctx, f.bot, ann.ID, map[string]any{"email": "ann@example.org"})
	require.NoError(t, err)
	assert.Equal(t, ann.Revision+1, again.Revision)
	got, err := f.svc.FindByEmail(ctx, f.bot, "ann@example.org")
	require.NoError(t, err)
	assert.Equal(t, ann.ID, got.ID)
	same, err := f.svc.SetFields(ctx, f.bot, ann.ID, map[string]any{"email": "ann@example.org"})
	require.NoError(t, err)
	assert.Equal(t, again.Revision, same.Revision, "then a write that changes nothing makes no revision")
}

// The email channel takes an address as its external id.
func TestEmailChannelIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	sub, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelEmail, "ann@example.org", Changes{})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "email", sub.Channel)
	got, err := f.svc.GetByIdentity(t.Context(), f.bot, ChannelEmail, "ann@example.org")
	require.NoError(t, err)
	assert.Equal(t, sub.ID, got.ID)
	_, _, err = f.svc.Upsert(t.Context(), f.bot, "fax", "1", Changes{})
	assert.Equal(t, []string{"channel"}, httpapitest.InvalidFields(t, err))
}
