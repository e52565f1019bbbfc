//go:build !unix

package sqlite

import "github.com/botplatform/api/shared/store"

// openReadCache returns a cache that never hits: this platform has no mapping of the
// wal-index here.
func openReadCache(string) *readCache { return &readCache{items: make(map[store.Key]store.Item)} }
