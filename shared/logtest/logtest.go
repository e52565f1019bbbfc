// Package logtest captures what the code under test logs: a buffer safe for the concurrent
// writes of a service's goroutines (a background job, a request's handler), and a logger
// that writes text lines into one.
package logtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer keeps what is written to it. It is safe for concurrent use; its zero value is
// ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Logger returns a logger that writes text lines, from level Info, into a new Buffer.
func Logger() (*slog.Logger, *Buffer) {
	b := &Buffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}
