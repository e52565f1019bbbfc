package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botplatform/api/shared/reqlog"
)

// BenchmarkGetBotHandler measures the in-process cost of an authenticated bot read, without
// the network, for profiling: go test -run - -bench GetBotHandler -cpuprofile cpu.out ./functions/local/
func BenchmarkGetBotHandler(b *testing.B) {
	mux, res := benchApp(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest("GET", "/api/bots/"+res.BotID, nil)
			r.Header.Set("Authorization", "Bearer "+res.Token)
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatal(w.Code)
			}
		}
	})
}

// BenchmarkPatchBotHandler measures the in-process cost of a revisioned bot update (the
// store's writer and its commits included), each goroutine on its own bot so that every
// write succeeds: go test -run - -bench PatchBotHandler -cpuprofile cpu.out ./functions/local/
func BenchmarkPatchBotHandler(b *testing.B) {
	mux, res := benchApp(b)
	var next atomic.Int64
	b.SetParallelism(8) // 16 writers on 2 cores, as tests/bench's 16 connections
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest("POST", "/api/bots", strings.NewReader(fmt.Sprintf(`{"name":"bench %d"}`, next.Add(1))))
		r.Header.Set("Authorization", "Bearer "+res.Token)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			b.Fatal(w.Code, w.Body.String())
		}
		var bot struct{ ID string }
		if err := json.Unmarshal(w.Body.Bytes(), &bot); err != nil {
			b.Fatal(err)
		}
		for rev := int64(1); pb.Next(); rev++ {
			body := fmt.Sprintf(`{"expected_revision":%d,"settings":{"session_timeout_minutes":%d}}`, rev, 1+rev%600)
			r := httptest.NewRequest("PATCH", "/api/bots/"+bot.ID, strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+res.Token)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatal(w.Code, w.Body.String())
			}
		}
	})
}

// benchApp opens the local process's app on a fresh data directory, with request logs
// buffered as serve runs them, and returns its handler and its demo account's bot and token.
func benchApp(b *testing.B) (http.Handler, bootstrapResult) {
	a, err := openApp(b.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	requests := reqlog.NewBuffered(a.RequestLog, a.Log, 100*time.Millisecond)
	b.Cleanup(func() { requests.Close(context.Background()) }) // runs before a.Close
	a.Requests = requests
	mux, err := a.handler()
	if err != nil {
		b.Fatal(err)
	}
	res, err := a.bootstrap(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return mux, res
}
