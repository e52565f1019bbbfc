package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

type recorder struct {
	mu   sync.Mutex
	recs []httpapi.RequestRecord
}

func (r *recorder) RecordRequest(_ context.Context, rec httpapi.RequestRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// A request that deleted its bot leaves no entry in the bot's request log, which is being
// erased; one that failed to delete it does, and its audit event is written either way.
func TestBotDeletedKeepsTheRequestOutOfTheBotsLog(t *testing.T) {
	t.Parallel()
	rec, pub := &recorder{}, &publisher{}
	mux, err := httpapi.NewMux(httpapi.Config{Authenticate: stubAuthenticate, Bots: &botLoader{}, Audit: pub,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }, Requests: rec})
	require.NoError(t, err)
	fail := true
	mux.Handle("DELETE /api/bots/{botID}", httpapi.NeedPAT("bots:write", auth.RightReactions), func(w http.ResponseWriter, r *http.Request) error {
		if fail {
			return httpapi.StaleRevision(2)
		}
		httpapi.BotDeleted(r.Context())
		return httpapi.NoContent(w)
	})
	for _, f := range []bool{true, false} {
		fail = f
		req := httptest.NewRequest("DELETE", "/api/bots/"+botA, nil)
		req.Header.Set("Authorization", "Bearer owner")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
	}
	require.Len(t, rec.recs, 1)
	assert.Equal(t, 409, rec.recs[0].Status, "only the failed deletion is logged against the bot")
	assert.Len(t, pub.published(), 2, "both are audited")
}
