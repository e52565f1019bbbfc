package sqlite

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/botplatform/api/shared/store"
)

// readCache remembers the items Get read while the database has not changed since. Any
// commit to the file, by this process or another (the admin commands write beside a
// running server), rewrites SQLite's wal-index header: the first 48 bytes of the -shm file,
// kept twice (https://www.sqlite.org/walformat.html: iChange counts transactions, mxFrame
// is the last committed frame, the salts change when the log restarts). The cache maps
// that page read-only and compares the header with the one seen before the cached read, so a
// hit costs no SQLite statement, and any write anywhere empties the cache: exact, not a TTL.
// What it wins is the read-mostly case, a bot's settings read by every request against
// the bot while nothing is written but the batched request log (ten commits a second).
type readCache struct {
	mapMu sync.RWMutex // held for reading while the mapping is read, for writing to unmap it
	shm   []byte       // the -shm file's first page, mapped; nil: no cache (or closed)
	unmap func() error

	mu      sync.Mutex
	version walHeader
	items   map[store.Key]store.Item
	bytes   int // of the items' data
}

// walHeader is one copy of the wal-index header, as 32-bit words.
type walHeader [12]uint32

// The cache's bounds: when full it starts again empty. An item larger than maxCachedItem
// (a content document, say) is not kept: the reads that matter are small records.
const (
	maxCached      = 4096
	maxCachedBytes = 8 << 20
	maxCachedItem  = 16 << 10
)

// header returns the current wal-index header, and false when the two copies differ (a
// writer is changing it: treat as changed) or no cache is mapped.
func (c *readCache) header() (walHeader, bool) {
	if c == nil {
		return walHeader{}, false
	}
	c.mapMu.RLock()
	defer c.mapMu.RUnlock()
	if c.shm == nil {
		return walHeader{}, false
	}
	var h [2]walHeader
	for copyN := range 2 {
		for i := range h[copyN] {
			// SQLite writes the words with plain stores from other threads and processes;
			// atomic loads keep each word whole, and comparing the two copies catches a
			// header read in the middle of a write, as SQLite's own readers do.
			p := (*uint32)(unsafe.Pointer(&c.shm[copyN*48+i*4]))
			h[copyN][i] = atomic.LoadUint32(p)
		}
	}
	isInit := h[0][3]&0xff != 0 // the byte after iChange; either byte order keeps it apart from szPage
	if h[0] != h[1] || !isInit {
		return walHeader{}, false
	}
	return h[0], true
}

// get returns the cached item at key, if it was read at version v and is still live.
func (c *readCache) get(key store.Key, v walHeader, now time.Time) (store.Item, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != v {
		return store.Item{}, false
	}
	it, ok := c.items[key]
	if !ok || it.Expired(now) {
		return store.Item{}, false
	}
	it.Data = append([]byte(nil), it.Data...) // the caller's own copy
	return it, true
}

// put remembers it, read at key after the header was v.
func (c *readCache) put(key store.Key, it store.Item, v walHeader) {
	if len(it.Data) > maxCachedItem {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != v || len(c.items) >= maxCached || c.bytes+len(it.Data) > maxCachedBytes {
		clear(c.items)
		c.version, c.bytes = v, 0
	}
	if old, ok := c.items[key]; ok {
		c.bytes -= len(old.Data)
	}
	it.Data = append([]byte(nil), it.Data...)
	c.items[key] = it
	c.bytes += len(it.Data)
}

// close unmaps the header; a Get that runs on reads from SQLite (and fails, the store
// being closed).
func (c *readCache) close() error {
	if c == nil {
		return nil
	}
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	unmap := c.unmap
	c.shm, c.unmap = nil, nil
	if unmap == nil {
		return nil
	}
	return unmap()
}
