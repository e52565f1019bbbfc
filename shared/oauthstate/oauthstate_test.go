package oauthstate_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/oauthstate"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

type start struct {
	Provider string `json:"provider"`
}

// A state is consumed once, by exactly one of concurrent callbacks, only under its own
// family's prefix, and only when the check accepts its start; the store holds its hash.
func TestConsumeOnce(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	ctx := t.Context()
	put := func(prefix, state, provider string) {
		t.Helper()
		b, err := store.Encode(start{Provider: provider})
		require.NoError(t, err)
		require.NoError(t, st.Put(ctx, store.Item{Key: oauthstate.Key(prefix, state), Revision: 1, Data: b}, store.MustNotExist))
	}
	accept := func(start) bool { return true }

	state := oauthstate.New()
	assert.Len(t, state, 43)
	assert.NotEqual(t, state, oauthstate.New())
	assert.NotContains(t, oauthstate.Key("CRMSTATE", state).PK, state, "the store keeps the hash, not the state")

	put("CRMSTATE", state, "hubspot")
	_, err := oauthstate.Consume(ctx, st, "METASTATE", state, accept)
	assert.ErrorIs(t, err, oauthstate.ErrInvalid, "another family's state")
	_, err = oauthstate.Consume(ctx, st, "CRMSTATE", state, func(s start) bool { return s.Provider == "salesforce" })
	assert.ErrorIs(t, err, oauthstate.ErrInvalid, "refused by the check")

	var wg sync.WaitGroup
	var mu sync.Mutex
	var won, lost int
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := oauthstate.Consume(ctx, st, "CRMSTATE", state, accept)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won++
				assert.Equal(t, "hubspot", got.Provider)
			} else {
				assert.ErrorIs(t, err, oauthstate.ErrInvalid)
				lost++
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, won, "exactly one callback gets the state")
	assert.Equal(t, 7, lost)

	for _, bad := range []string{"", state + state + state, "unknown"} {
		_, err := oauthstate.Consume(ctx, st, "CRMSTATE", bad, accept)
		assert.ErrorIs(t, err, oauthstate.ErrInvalid, "%q", bad)
	}
}
