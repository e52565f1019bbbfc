package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Writer commits the writes made through it on one write connection, one transaction at a
// time: the caller whose write finds no commit under way leads, taking every write waiting
// and committing them in one SQLite transaction, each under a savepoint of its own, so that
// one whose condition fails, or that fails otherwise, is undone alone. Under load one commit
// (one lock round trip, one set of WAL frames for the pages the writes share, and under
// synchronous=FULL one sync) serves many callers: SQLite has one writer anyway, and its
// per-commit cost, not the writes, bounded the write rate. A lone write commits at once, on
// its caller's goroutine: no hand-off to another goroutine and back (LevelDB's write
// leader). The store and the event log (shared/eventlog/sqlitelog) each write through one.
type Writer struct {
	db                             *sql.DB
	savepoint, release, rollbackTo *sql.Stmt

	mu      sync.Mutex
	queue   []*writeOp    // submitted, not yet taken by a leader; guarded by mu
	leading bool          // a caller is committing; guarded by mu
	closed  bool          // guarded by mu
	idle    chan struct{} // closed when the last leader stops after Close; guarded by mu
}

// maxBatch bounds the writes of one commit, so that a caller waits for at most this many
// others.
const maxBatch = 64

// writeOp is one caller's write: run applies it inside the leader's transaction.
type writeOp struct {
	run func(ctx context.Context, tx *sql.Tx) error
	// done gets the write's outcome, or errLead: the write is first in line and its caller
	// commits the next batch (a leader hands on after one batch, so no caller leads for
	// long while others keep writing).
	done chan error
	// panicked is what run panicked with, set before done is sent: Submit panics with it.
	panicked any
}

var (
	// errClosed answers writes made after Close.
	errClosed = errors.New("sqlite: closed")
	// errLead hands the lead to a waiting caller; Submit never returns it.
	errLead = errors.New("sqlite: lead the next commit")
)

// NewWriter returns a Writer on db, whose one connection (SetMaxOpenConns(1)) takes the
// write lock at BEGIN (DSN's _txlock=immediate).
func NewWriter(ctx context.Context, db *sql.DB) (*Writer, error) {
	w := &Writer{db: db}
	for _, st := range []struct {
		dst **sql.Stmt
		sql string
	}{{&w.savepoint, `SAVEPOINT w`}, {&w.release, `RELEASE w`}, {&w.rollbackTo, `ROLLBACK TO w`}} {
		p, err := db.PrepareContext(ctx, st.sql)
		if err != nil {
			w.closeStatements()
			return nil, err
		}
		*st.dst = p
	}
	return w, nil
}

// Submit has the writer apply run and commit it, and returns run's error or the commit's. A
// write whose ctx is done before a leader reaches it is not applied (ctx's error). Once
// applied, run's statements run without ctx's cancellation: SQLite rolls back the whole
// transaction of an interrupted write, which would undo the batch's other writes.
func (w *Writer) Submit(ctx context.Context, run func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &writeOp{run: func(bctx context.Context, tx *sql.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return run(bctx, tx)
	}, done: make(chan error, 1)}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	w.queue = append(w.queue, o)
	lead := !w.leading
	w.leading = true
	w.mu.Unlock()
	for {
		if lead {
			w.lead()
		}
		err := <-o.done
		if o.panicked != nil {
			panic(o.panicked)
		}
		if err != errLead {
			return err
		}
		lead = true
	}
}

// lead commits one batch, the writes waiting from the front of the queue, and then hands
// the lead on.
func (w *Writer) lead() {
	w.mu.Lock()
	n := min(len(w.queue), maxBatch)
	batch := w.queue[:n:n]
	w.queue = w.queue[n:]
	w.mu.Unlock()
	w.commit(batch)
	w.handOn()
}

// handOn hands the lead to the first write waiting, or gives it up when none is.
func (w *Writer) handOn() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) > 0 {
		w.queue[0].done <- errLead
		return
	}
	w.queue = nil // let the backing array go: it holds writes already answered
	w.leading = false
	if w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
}

// Close waits for the writes submitted before it to commit and refuses later ones. It
// leaves db open.
func (w *Writer) Close() {
	w.mu.Lock()
	w.closed = true
	var idle chan struct{}
	if w.leading {
		if w.idle == nil {
			w.idle = make(chan struct{})
		}
		idle = w.idle
	}
	w.mu.Unlock()
	if idle != nil {
		<-idle
	}
	w.closeStatements()
}

func (w *Writer) closeStatements() {
	for _, st := range []*sql.Stmt{w.savepoint, w.release, w.rollbackTo} {
		if st != nil {
			st.Close()
		}
	}
}

// commit applies batch in one transaction and tells each caller its outcome. A write that
// panics undoes the whole batch: the others are told so, and the panic is raised again in
// its own caller's goroutine (Submit), whoever leads; a panic outside the writes, in the
// leader's.
func (w *Writer) commit(batch []*writeOp) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	var tx *sql.Tx
	running := -1 // the write being applied
	defer func() {
		if v := recover(); v != nil {
			if tx != nil {
				_ = tx.Rollback()
			}
			for i := range errs {
				errs[i] = fmt.Errorf("sqlite: a write of the same transaction panicked, and it was rolled back: %v", v)
			}
			if running < 0 {
				running = 0 // not a write's own panic: the leader's (its write is first)
			}
			batch[running].panicked = v
		}
		for i, o := range batch {
			o.done <- errs[i]
		}
	}()
	fail := func(err error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	var err error
	if tx, err = w.db.BeginTx(ctx, nil); err != nil {
		fail(err)
		return
	}
	if len(batch) == 1 {
		// Alone: the transaction is the write's, and a failure rolls it back.
		running = 0
		errs[0] = batch[0].run(ctx, tx)
		running = -1
		if errs[0] != nil {
			_ = tx.Rollback()
			return
		}
	} else {
		for i, o := range batch {
			if _, err := tx.StmtContext(ctx, w.savepoint).ExecContext(ctx); err != nil {
				_ = tx.Rollback()
				fail(fmt.Errorf("savepoint: %w", err))
				return
			}
			running = i
			errs[i] = o.run(ctx, tx)
			running = -1
			if errs[i] != nil {
				if _, err := tx.StmtContext(ctx, w.rollbackTo).ExecContext(ctx); err != nil {
					// SQLite rolled the whole transaction back itself (an I/O error, a
					// full disk): the writes before this one are gone too.
					_ = tx.Rollback()
					fail(fmt.Errorf("this write shared a transaction that failed: %w", errs[i]))
					return
				}
			}
			if _, err := tx.StmtContext(ctx, w.release).ExecContext(ctx); err != nil {
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
