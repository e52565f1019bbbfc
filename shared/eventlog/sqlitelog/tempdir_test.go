package sqlitelog

import (
	"os"
	"testing"
)

// benchDir is the benchmarks' directory, shared by all of them and removed when they end.
var benchDir string

func mkdirTemp() (string, error) {
	dir, err := os.MkdirTemp("", "sqlitelog-bench-")
	benchDir = dir
	return dir, err
}

// TestMain removes the benchmarks' log (a million events are a few hundred megabytes).
func TestMain(m *testing.M) {
	code := m.Run()
	if benchLog != nil {
		benchLog.Close()
	}
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}
