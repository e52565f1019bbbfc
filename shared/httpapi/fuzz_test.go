package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/botplatform/api/shared/httpapi"
)

// FuzzDecode sends arbitrary bodies through the kernel to a route that decodes strictly:
// never a panic, never a 5xx, only the documented client errors, and memory linear in the
// body (bytes allocated at most a fixed multiple of its size, plus a constant).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","count":2,"settings":{"timezone":"UTC","locales":["en"]},"items":[{}],"tags":{"a":{}}}`,
		`{"note":"n","rights":["reactions"]}`,
		`{"nmae":"a"}`, `{"name":"a","name":"b"}`, `{"count":"x"}`, `[1,2]`, `{"a":1}}`, ``,
		strings.Repeat("[", 70), `{"items":[` + strings.Repeat(`{},`, 50) + `{}]}`,
		"{\"name\":\"\xff\"}", `{"name":"\ud800"}`, `{"name":"\ud83d\ude00"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// A kernel per input: what the kernel keeps of earlier inputs (its log, the audit
		// events) would otherwise count against this one.
		k := newKernel(t)
		k.mux.Handle("POST /api/things/decode", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
			var v sample
			if err := httpapi.Decode(w, r, &v); err != nil {
				return err
			}
			return httpapi.WriteJSON(w, http.StatusCreated, map[string]int{"items": len(v.Items)})
		})
		r := httptest.NewRequest(http.MethodPost, "/api/things/decode", strings.NewReader(string(body)))
		r.Header.Set("Authorization", "Bearer owner")
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		k.mux.ServeHTTP(w, r)
		runtime.ReadMemStats(&after)
		switch w.Code {
		case http.StatusCreated, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		if used := after.TotalAlloc - before.TotalAlloc; used > uint64(200*len(body)+(1<<20)) {
			t.Fatalf("%d bytes allocated for a %d-byte body", used, len(body))
		}
	})
}

// FuzzCursor: a list cursor the client sends is either one this server sealed for this
// list, or 400 invalid_cursor; nothing else, and never a panic.
func FuzzCursor(f *testing.F) {
	c := httpapi.NewCursors([]byte("0123456789abcdef0123456789abcdef"))
	sealedFor := func(path string) string {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		p, err := c.Page(r)
		if err != nil {
			f.Fatal(err)
		}
		return *c.Next(p, `["shape","k1"]`)
	}
	good := sealedFor("/api/bots")
	f.Add(good, "/api/bots")
	f.Add(good, "/api/bots?label=x")
	f.Add(sealedFor("/api/bots?label=x"), "/api/bots?label=x")
	f.Add("", "/api/bots")
	f.Add("AQ", "/api/bots")
	f.Add(strings.Repeat("A", 300), "/api/things")
	f.Fuzz(func(t *testing.T, cursor, target string) {
		u, err := url.Parse(target)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return
		}
		q := u.Query()
		q.Set("cursor", cursor)
		u.RawQuery = q.Encode()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL = u
		p, err := c.Page(r)
		if err != nil {
			he, ok := err.(*httpapi.Error)
			if !ok || (he.Code != "invalid_cursor" && he.Code != "invalid_parameter") {
				t.Fatalf("cursor %q: %v", cursor, err)
			}
			return
		}
		if cursor != "" && p.Cursor != `["shape","k1"]` {
			t.Fatalf("cursor %q opened to %q, which was never sealed", cursor, p.Cursor)
		}
	})
}
