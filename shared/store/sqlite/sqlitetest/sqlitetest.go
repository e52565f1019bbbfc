// Package sqlitetest opens the embedded store for tests: one fresh SQLite file per test,
// closed when the test ends.
package sqlitetest

import (
	"path/filepath"
	"testing"

	"github.com/botplatform/api/shared/store/sqlite"
)

// Open opens a new, empty store in tb's temporary directory, with opts (sqlite.WithClock to
// decide expiry by a test clock), and closes it when tb and its subtests have finished.
func Open(tb testing.TB, opts ...sqlite.Option) *sqlite.Store {
	tb.Helper()
	st, err := sqlite.Open(filepath.Join(tb.TempDir(), "s.db"), opts...)
	if err != nil {
		tb.Fatalf("open the SQLite store: %v", err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}
