package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// countingStore counts the commits made through it.
type countingStore struct {
	store.Store
	commits int
}

func (s *countingStore) Put(ctx context.Context, it store.Item, c store.Condition) error {
	s.commits++
	return s.Store.Put(ctx, it, c)
}

func (s *countingStore) Transact(ctx context.Context, w []store.Write) error {
	s.commits++
	return s.Store.Transact(ctx, w)
}

// A handler may commit its request's audit event in its own transaction (StageAudit): the
// request then costs one commit, and the trail holds exactly one event with the status the
// client got, whether the handler answered the staged status, failed after committing it
// (the real event replaces the staged one under the same id), or never committed it (the
// kernel publishes as usual). A publisher outside the store (the bus) stages nothing.
func TestStagedAuditEvent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		commit  bool // the handler's transaction commits the staged event
		fail    bool // the handler answers 409 after committing
		status  int
		commits int
	}{
		{name: "answered as staged", commit: true, status: 201, commits: 1},
		{name: "failed after staging", commit: true, fail: true, status: 409, commits: 2},
		{name: "transaction without the event", status: 201, commits: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := &countingStore{Store: sqlitetest.Open(t)}
			trail := audit.NewLog(st)
			mux, err := httpapi.NewMux(httpapi.Config{Authenticate: stubAuthenticate, Bots: &botLoader{}, Audit: trail,
				Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
			require.NoError(t, err)
			thing := store.Item{Key: store.Key{PK: "THING", SK: "1"}, Data: []byte(`{}`), Revision: 1}
			mux.Handle("POST /api/things", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
				writes := []store.Write{store.PutOp(thing, store.MustNotExist)}
				staged, committed, ok := httpapi.StageAudit(r.Context(), st, http.StatusCreated)
				require.True(t, ok, "the trail is in the store")
				if c.commit {
					writes = append(writes, staged)
				}
				if err := st.Transact(r.Context(), writes); err != nil {
					return err
				}
				if c.commit {
					committed()
				}
				if c.fail {
					return httpapi.E(httpapi.KindConflict, "late", "refused after the commit")
				}
				return httpapi.WriteJSON(w, http.StatusCreated, map[string]any{})
			})
			r := httptest.NewRequest(http.MethodPost, "/api/things", strings.NewReader("{}"))
			r.Header.Set("Authorization", "Bearer owner")
			r.Header.Set("X-Request-Id", "req-staged")
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, r)
			assert.Equal(t, c.status, rec.Code)
			assert.Equal(t, c.commits, st.commits, "commits for the write and its event")
			events, _, err := trail.List(context.Background(), "acct_A", "", 10, "")
			require.NoError(t, err)
			require.Len(t, events, 1, "one event")
			assert.Equal(t, c.status, events[0].Status)
			assert.Equal(t, "req-staged", events[0].RequestID)
			assert.Equal(t, "POST /api/things", events[0].Route)
		})
	}

	// The bus: nothing to stage, and a context outside a mutating route has no event.
	k := newKernel(t)
	var ok bool
	k.mux.Handle("POST /api/bus", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
		_, _, ok = httpapi.StageAudit(r.Context(), sqlitetest.Open(t), http.StatusOK)
		return httpapi.WriteJSON(w, http.StatusOK, map[string]any{})
	})
	r := httptest.NewRequest(http.MethodPost, "/api/bus", strings.NewReader("{}"))
	r.Header.Set("Authorization", "Bearer owner")
	k.mux.ServeHTTP(httptest.NewRecorder(), r)
	assert.False(t, ok)
	assert.Len(t, k.audit.published(), 1, "published as usual")
	_, _, ok = httpapi.StageAudit(context.Background(), sqlitetest.Open(t), http.StatusOK)
	assert.False(t, ok)
}

// An event staged for another store than the trail's would land in the wrong file: refused.
func TestStageAuditRefusesAnotherStore(t *testing.T) {
	t.Parallel()
	trail := audit.NewLog(sqlitetest.Open(t))
	mux, err := httpapi.NewMux(httpapi.Config{Authenticate: stubAuthenticate, Bots: &botLoader{}, Audit: trail,
		Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	require.NoError(t, err)
	var ok bool
	mux.Handle("POST /api/things", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
		_, _, ok = httpapi.StageAudit(r.Context(), sqlitetest.Open(t), http.StatusCreated)
		return httpapi.WriteJSON(w, http.StatusCreated, map[string]any{})
	})
	r := httptest.NewRequest(http.MethodPost, "/api/things", strings.NewReader("{}"))
	r.Header.Set("Authorization", "Bearer owner")
	mux.ServeHTTP(httptest.NewRecorder(), r)
	assert.False(t, ok)
	events, _, err := trail.List(context.Background(), "acct_A", "", 10, "")
	require.NoError(t, err)
	assert.Len(t, events, 1, "published as usual")
}
