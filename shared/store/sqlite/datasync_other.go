//go:build !linux

package sqlite

import "os"

// datasync flushes f (fsync: fdatasync is not portable).
func datasync(f *os.File) error { return f.Sync() }
