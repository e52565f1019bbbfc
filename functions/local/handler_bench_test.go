package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/botplatform/api/shared/reqlog"
)

// BenchmarkGetBotHandler measures the in-process cost of an authenticated bot read, without
// the network, for profiling: go test -run - -bench GetBotHandler -cpuprofile cpu.out ./functions/local/
func BenchmarkGetBotHandler(b *testing.B) {
	a, err := openApp(b.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	requests := reqlog.NewBuffered(a.RequestLog, a.Log, 100*time.Millisecond)
	defer requests.Close(context.Background())
	a.Requests = requests // as serve runs it
	mux, _ := a.handler()
	res, err := a.bootstrap(context.Background())
	if err != nil {
		b.Fatal(err)
	}
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
