package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Writes go through one goroutine, the writer, which commits the writes waiting when it
// becomes free in one SQLite transaction, each under a savepoint of its own, so that one
// whose condition fails, or that fails otherwise, is undone alone. Under load one commit
// (one lock round trip, one set of WAL frames for the pages the writes share) serves many
// callers: SQLite has one writer anyway, and its per-commit cost, not the writes, bounded
// the write rate. A lone write is committed at once: nothing waits to be batched.

// maxBatch bounds the writes of one commit, so that a caller waits for at most this many
// others.
const maxBatch = 64

// writeOp is one caller's write: run applies it inside the writer's transaction.
type writeOp struct {
	run  func(ctx context.Context, tx *sql.Tx) error
	done chan error
}

// errClosed answers writes made after Close.
var errClosed = errors.New("sqlite: the store is closed")

// submit has the writer apply run and commit it, and returns run's error or the commit's.
// A write whose ctx is done before the writer reaches it is not applied (ctx's error). Once
// applied, run's statements run without ctx's cancellation: SQLite rolls back the whole
// transaction of an interrupted write, which would undo the batch's other writes.
func (s *Store) submit(ctx context.Context, run func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &writeOp{run: func(bctx context.Context, tx *sql.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return run(bctx, tx)
	}, done: make(chan error, 1)}
	s.opsMu.RLock()
	if s.opsClosed {
		s.opsMu.RUnlock()
		return errClosed
	}
	s.ops <- o
	s.opsMu.RUnlock()
	return <-o.done
}

// writeLoop is the writer: it runs until Close closes ops, and commits what was queued
// before that.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*writeOp, 0, maxBatch)
	for o := range s.ops {
		batch = append(batch[:0], o)
	more:
		for len(batch) < maxBatch {
			select {
			case o, ok := <-s.ops:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		s.commitBatch(batch)
	}
}

// commitBatch applies batch in one transaction and tells each caller its outcome.
func (s *Store) commitBatch(batch []*writeOp) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	finish := func() {
		for i, o := range batch {
			o.done <- errs[i]
		}
	}
	defer finish()
	fail := func(err error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	if len(batch) == 1 {
		// Alone: the transaction is the write's, and a failure rolls it back.
		if errs[0] = batch[0].run(ctx, tx); errs[0] != nil {
			_ = tx.Rollback()
			return
		}
	} else {
		for i, o := range batch {
			if _, err := tx.StmtContext(ctx, s.savepoint).ExecContext(ctx); err != nil {
				_ = tx.Rollback()
				fail(fmt.Errorf("savepoint: %w", err))
				return
			}
			if errs[i] = o.run(ctx, tx); errs[i] != nil {
				if _, err := tx.StmtContext(ctx, s.rollbackTo).ExecContext(ctx); err != nil {
					// SQLite rolled the whole transaction back itself (an I/O error, a
					// full disk): the writes before this one are gone too.
					_ = tx.Rollback()
					fail(fmt.Errorf("this write shared a transaction that failed: %w", errs[i]))
					return
				}
			}
			if _, err := tx.StmtContext(ctx, s.release).ExecContext(ctx); err != nil {
				_ = tx.Rollback()
				fail(fmt.Errorf("release savepoint: %w", err))
				return
			}
		}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
	}
}
