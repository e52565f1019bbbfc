package crm

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// An erased subscriber's link in each connection goes, with the record's pointer to them and
// their open conflict (both sides' values); another subscriber's link stays; the CRM's record
// is left alone, and a later reconcile of its changes writes no one.
func TestEraseStepForgetsTheSubscribersLink(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	ann := f.subscriber(t, f.bot, "1", map[string]any{"email": "ann@example.com"}, false)
	bob := f.subscriber(t, f.bot, "2", map[string]any{"email": "bob@example.com"}, false)
	res := f.Do(t, "PUT", f.hsURL+"/mapping", json.RawMessage(hubspotMapping))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	f.sync(t, KindInitialSync)
	records := f.hs.Records("contacts")
	require.Len(t, records, 2)

	// A conflict on Ann's last name.
	var annRecord string
	for _, r := range records {
		if r.Props["email"] == "ann@example.com" {
			annRecord = r.ID
		}
	}
	require.True(t, f.hs.Change("contacts", annRecord, map[string]string{"lastname": "Smith"}))
	last := "Jones"
	sub, err := f.subs.Get(t.Context(), f.bot, ann)
	require.NoError(t, err)
	_, err = f.subs.Update(sqlitetest.Unrecorded(t.Context()), f.bot, ann, sub.Revision, subscribers.Changes{LastName: &last})
	require.NoError(t, err)
	f.sync(t, KindReconcile)
	res = f.Do(t, "GET", f.hsURL+"/conflicts?status=open", nil)
	require.Len(t, res.JSON["data"], 1)

	conn := f.hsID
	for range 2 { // a repeated step finds nothing more
		require.NoError(t, purge.Run(t.Context(), EraseStep(f.raw), purge.Erasure{BotID: f.bot, SubscriberID: ann}))
	}

	_, err = f.raw.Get(t.Context(), linkKey(f.bot, conn, ann))
	assert.ErrorIs(t, err, store.ErrNotFound, "Ann's link")
	_, err = f.raw.Get(t.Context(), recordKey(f.bot, conn, annRecord))
	assert.ErrorIs(t, err, store.ErrNotFound, "her record's pointer")
	res = f.Do(t, "GET", f.hsURL+"/conflicts", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Empty(t, res.JSON["data"], "her conflict, with both sides' values")
	left, err := f.raw.Query(t.Context(), store.Query{PK: syncPK(f.bot, conn), Prefix: "OPEN#" + ann})
	require.NoError(t, err)
	assert.Empty(t, left.Items)
	_, err = f.raw.Get(t.Context(), linkKey(f.bot, conn, bob))
	assert.NoError(t, err, "Bob's link stays")
	assert.Len(t, f.hs.Records("contacts"), 2, "nothing is deleted in the CRM")

	// The CRM changes Ann's record again: a record of no one's now.
	require.True(t, f.hs.Change("contacts", annRecord, map[string]string{"lastname": "Smythe"}))
	job := f.sync(t, KindReconcile)
	assert.Equal(t, float64(0), progress(t, job)["pulled"], job)
	assert.Equal(t, float64(0), progress(t, job)["conflicts"], job)
}
