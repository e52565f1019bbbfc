package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
)

// A hostile body of up to the 1 MiB cap costs memory linear in its size, whatever its shape:
// the peak heap while it is served stays under 50 MB. The peak is sampled from the runtime's
// heap metrics while the request runs, with the collector set to run at 10% growth so that
// the heap in use follows the live data closely. Not parallel: nothing else allocates
// meanwhile.
func TestHostileBodiesStayLinear(t *testing.T) {
	const limit = 50 << 20
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	k := newKernel(t)
	k.mux.Handle("POST /api/things/decode", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
		var v sample
		if err := httpapi.Decode(w, r, &v); err != nil {
			return err
		}
		return httpapi.WriteJSON(w, http.StatusCreated, map[string]int{"items": len(v.Items), "tags": len(v.Tags)})
	})
	fill := func(head, unit, tail string) string {
		n := (httpapi.MaxBodyBytes - len(head) - len(tail)) / len(unit)
		return head + strings.Repeat(unit, n) + tail
	}
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	tests := []struct {
		name   string
		body   string
		status int
	}{
		{"the reported body: 100,000 [ then ]", deep, 400},
		{"1 MiB of [", strings.Repeat("[", httpapi.MaxBodyBytes), 400},
		{"1 MiB of {\"a\":", fill("", `{"a":`, ""), 400},
		{"deep inside a member", fill(`{"tags":{"a":{"locales":`, "[", ""), 400},
		{"wide: 1 MiB of empty objects", fill(`{"items":[`, `{},`, `{}]}`), 201},
		{"wide: many small arrays at the limit", fill(`{"items":[{"locales":[`, `"",`, `""]}]}`), 201},
		{"many map members", fill(`{"tags":{`, `"`+strings.Repeat("k", 8)+`":{},`, `"z":{}}}`), 400}, // duplicate keys: refused at the second
		{"many distinct map members", distinctMembers(), 201},
		{"long unknown keys", fill(`{"settings":{"`, "k", `":1}}`), 400},
		{"invalid UTF-8 at the end of a wide body", fill(`{"items":[`, `{},`, "{\"locales\":[\"\xff\"]}]}"), 400},
	}
	const tok = "owner" // stubAuthenticate's account owner
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.LessOrEqual(t, len(tt.body), httpapi.MaxBodyBytes)
			r := httptest.NewRequest(http.MethodPost, "/api/things/decode", strings.NewReader(tt.body))
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			runtime.GC()
			base := heapInUse()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			stop := make(chan struct{})
			peak := make(chan uint64)
			go func() {
				var top uint64
				for {
					top = max(top, heapInUse())
					select {
					case <-stop:
						peak <- top
						return
					case <-time.After(50 * time.Microsecond):
					}
				}
			}()
			k.mux.ServeHTTP(w, r)
			close(stop)
			top := <-peak
			used := top - min(base, top)
			runtime.ReadMemStats(&after)
			assert.Equal(t, tt.status, w.Code, "%.300s", w.Body.String())
			t.Logf("%d body bytes: peak heap +%d KB, %d KB allocated in all", len(tt.body), used>>10, (after.TotalAlloc-before.TotalAlloc)>>10)
			assert.Less(t, used, uint64(limit), "peak heap +%d MB", used>>20)
			if tt.status == 400 && strings.HasPrefix(tt.name, "1 MiB of") {
				assert.Contains(t, w.Body.String(), "64 levels")
			}
		})
	}
}

// distinctMembers is a 1 MiB object with a map member of distinct keys.
func distinctMembers() string {
	var b strings.Builder
	b.WriteString(`{"tags":{`)
	for i := 0; b.Len() < httpapi.MaxBodyBytes-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`":{}`)
	}
	b.WriteString(`}}`)
	return b.String()
}

// heapInUse is the bytes of heap objects, live or not yet swept.
func heapInUse() uint64 {
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}
