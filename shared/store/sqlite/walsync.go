package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/botplatform/api/shared/store"
)

// WALSync makes the commits of a database in WAL mode durable when its write connection
// commits as synchronous=NORMAL does (the WAL written, not synced): it syncs the WAL itself,
// so that concurrent writers share one sync (group commit) and the writes of one piece of
// work made under a store.Deferral share a sync too. The store syncs its file with one, and
// so does the event log beside it (shared/eventlog/sqlitelog). A nil *WALSync syncs nothing:
// a database under Normal durability.
type WALSync struct {
	walPath string
	commits atomic.Uint64 // commits counted through Committed: the marks of Flush
	mu      sync.Mutex    // one sync at a time; the writers waiting behind it are covered by it
	synced  uint64        // every commit up to this mark is durable; guarded by mu
}

var _ store.Flusher = (*WALSync)(nil)

// NewWALSync returns the WALSync of the database file at path under durability d: nil
// (nothing to sync) under Normal.
func NewWALSync(path string, d Durability) *WALSync {
	if d != Full {
		return nil
	}
	return &WALSync{walPath: path + "-wal"}
}

// Committed makes a write that has just committed as durable as the database's setting
// promises before the write is reported done: synced, or left to ctx's open store.Deferral
// to sync with a later write of the same piece of work. op names the write in an error.
func (w *WALSync) Committed(ctx context.Context, op string) error {
	if w == nil {
		return nil
	}
	mark := w.commits.Add(1)
	if store.DeferralOf(ctx).Defer(w, mark) {
		return nil
	}
	if err := w.Flush(ctx, mark); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Flush implements store.Flusher: it returns once every commit up to mark is durable. The
// writers that queue behind one sync find their commits covered by it, so concurrent
// writers share syncs (group commit). A commit counts once its write to the WAL returned,
// so the sync that starts after it covers it; fsync is per file, not per descriptor.
func (w *WALSync) Flush(_ context.Context, mark uint64) error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.synced >= mark {
		return nil
	}
	target := w.commits.Load()
	f, err := os.Open(w.walPath)
	if errors.Is(err, fs.ErrNotExist) {
		// No WAL: the last connection checkpointed it into the database file, which
		// SQLite syncs before it removes the WAL.
		w.synced = target
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync the WAL: %w", err)
	}
	err = datasync(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("sync the WAL: %w", err)
	}
	w.synced = target
	return nil
}

// Unsynced reports how many of the commits counted are not known to be durable yet: a
// diagnostic for tests (0 under Normal).
func (w *WALSync) Unsynced() uint64 {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.commits.Load() - w.synced
}
