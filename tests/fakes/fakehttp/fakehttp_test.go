package fakehttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

func TestLog(t *testing.T) {
	t.Parallel()
	var l fakehttp.Log[int]
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { l.Add(i) })
	}
	wg.Wait()
	all := l.All()
	assert.Len(t, all, 50)
	all[0] = -1
	assert.NotContains(t, l.All(), -1, "All returns a copy")
}

func TestQueue(t *testing.T) {
	t.Parallel()
	var q fakehttp.Queue[string]
	q.Push(2, "send")
	q.Push(1, "save")
	isSave := func(m string) bool { return m == "save" }

	got, ok := q.Take(isSave)
	require.True(t, ok)
	assert.Equal(t, "save", got, "a match further back is taken")
	_, ok = q.Take(isSave)
	assert.False(t, ok, "each queued value is used once")
	for range 2 {
		got, ok = q.Take(nil)
		require.True(t, ok)
		assert.Equal(t, "send", got)
	}
	_, ok = q.Take(nil)
	assert.False(t, ok)
}

func TestPost(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var body []byte
	srv := fakehttp.Start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		fakehttp.WriteJSON(w, http.StatusAccepted, map[string]string{"ok": "yes"})
	}))
	status, answer, err := fakehttp.Post(srv.URL+"/hook", []byte(`{"a":1}`), http.Header{"x-secret": {"s3"}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, status)
	assert.JSONEq(t, `{"ok":"yes"}`, string(answer))
	assert.Equal(t, http.MethodPost, got.Method)
	assert.Equal(t, "application/json", got.Header.Get("Content-Type"))
	assert.Equal(t, "s3", got.Header.Get("X-Secret"))
	assert.Equal(t, `{"a":1}`, string(body))
}

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]int{"error_code": 100})
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"error_code":100}`, w.Body.String())

	w = httptest.NewRecorder()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fakehttp.WriteJSON(w, http.StatusOK, 1)
	assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"), "a provider's own Content-Type stays")
}

func TestProxyError(t *testing.T) {
	t.Parallel()
	srv := fakehttp.Start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fakehttp.ProxyError(w, http.StatusBadGateway)
	}))
	res, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	assert.Equal(t, "text/html", res.Header.Get("Content-Type"))
	assert.Contains(t, string(b), "<h1>502 Bad Gateway</h1>")
}

func TestRandomString(t *testing.T) {
	t.Parallel()
	s := fakehttp.RandomString(35)
	assert.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9_-]{35}$`), s)
	assert.NotEqual(t, s, fakehttp.RandomString(35))
}
