package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// flusher is a store.Flusher that records its flushes and, through started, whether the
// response had begun when each ran.
type flusher struct {
	mu      sync.Mutex
	marks   []uint64
	started []bool
	w       *trackingWriter
}

func (f *flusher) Flush(_ context.Context, mark uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.marks = append(f.marks, mark)
	f.started = append(f.started, f.w.hasStarted())
	return nil
}

// A mutating route's handler runs with an open store.Deferral; its writes are flushed
// before any byte of the response, whether or not the audit event could be written (the
// event's own sync covers them only when it lands in the same store), and a GET has none.
func TestMutatingRoutesDeferTheirSyncsToTheResponse(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		k := newKernel(t)
		k.audit.fail = fail
		w := &trackingWriter{ResponseRecorder: httptest.NewRecorder()}
		f := &flusher{w: w}
		var duringPublish bool
		k.audit.check = func(audit.Event) {
			f.mu.Lock()
			duringPublish = len(f.marks) > 0
			f.mu.Unlock()
		}
		k.mux.Handle("POST /api/deferred", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
			d := store.DeferralOf(r.Context())
			require.NotNil(t, d)
			assert.True(t, d.Defer(f, 3), "open while the handler runs")
			assert.True(t, d.Defer(f, 7))
			return httpapi.WriteJSON(w, http.StatusCreated, map[string]any{})
		})
		var get *store.Deferral
		k.mux.Handle("GET /api/deferred", httpapi.Need("things:read"), func(w http.ResponseWriter, r *http.Request) error {
			get = store.DeferralOf(r.Context())
			return httpapi.WriteJSON(w, http.StatusOK, map[string]any{})
		})

		r := httptest.NewRequest(http.MethodPost, "/api/deferred", strings.NewReader("{}"))
		r.Header.Set("Authorization", "Bearer owner")
		k.mux.ServeHTTP(w, r)
		assert.Equal(t, http.StatusCreated, w.Code)
		assert.False(t, duringPublish, "the audit event is written as a synced commit, after the deferral closed, before the flush")
		assert.Equal(t, []uint64{7}, f.marks, "one flush, to the highest mark")
		assert.Equal(t, []bool{false}, f.started, "flushed before the response started")

		r = httptest.NewRequest(http.MethodGet, "/api/deferred", nil)
		r.Header.Set("Authorization", "Bearer owner")
		k.mux.ServeHTTP(httptest.NewRecorder(), r)
		assert.Nil(t, get, "reads defer nothing")
	}
}
