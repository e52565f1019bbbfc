package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Writer commits the writes made through it on one write connection from one goroutine:
// when it becomes free it takes every write waiting and commits them in one SQLite
// transaction, each under a savepoint of its own, so that one whose condition fails, or that
// fails otherwise, is undone alone. Under load one commit (one lock round trip, one set of
// WAL frames for the pages the writes share, and under synchronous=FULL one sync) serves
// many callers: SQLite has one writer anyway, and its per-commit cost, not the writes,
// bounded the write rate. A lone write commits at once: nothing waits to be batched. The
// store and the event log (shared/eventlog/sqlitelog) each write through one.
type Writer struct {
	db                             *sql.DB
	savepoint, release, rollbackTo *sql.Stmt

	ops    chan *writeOp
	mu     sync.RWMutex // held to send on ops, and to close it
	closed bool
	done   chan struct{}
}

// maxBatch bounds the writes of one commit, so that a caller waits for at most this many
// others.
const maxBatch = 64

// writeOp is one caller's write: run applies it inside the writer's transaction.
type writeOp struct {
	run  func(ctx context.Context, tx *sql.Tx) error
	done chan error
}

// errClosed answers writes made after Close.
var errClosed = errors.New("sqlite: closed")

// NewWriter starts a Writer on db, whose one connection (SetMaxOpenConns(1)) takes the write
// lock at BEGIN (DSN's _txlock=immediate).
func NewWriter(ctx context.Context, db *sql.DB) (*Writer, error) {
	w := &Writer{db: db, ops: make(chan *writeOp, 4*maxBatch), done: make(chan struct{})}
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
	go w.loop()
	return w, nil
}

// Submit has the writer apply run and commit it, and returns run's error or the commit's. A
// write whose ctx is done before the writer reaches it is not applied (ctx's error). Once
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
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return errClosed
	}
	w.ops <- o
	w.mu.RUnlock()
	return <-o.done
}

// Close commits the writes submitted before it, stops the writer and refuses later ones. It
// leaves db open.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ops)
	}
	w.mu.Unlock()
	<-w.done
	w.closeStatements()
}

func (w *Writer) closeStatements() {
	for _, st := range []*sql.Stmt{w.savepoint, w.release, w.rollbackTo} {
		if st != nil {
			st.Close()
		}
	}
}

// loop is the writer: it runs until Close closes ops, and commits what was queued before.
func (w *Writer) loop() {
	defer close(w.done)
	batch := make([]*writeOp, 0, maxBatch)
	for o := range w.ops {
		batch = append(batch[:0], o)
	more:
		for len(batch) < maxBatch {
			select {
			case o, ok := <-w.ops:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		w.commit(batch)
	}
}

// commit applies batch in one transaction and tells each caller its outcome.
func (w *Writer) commit(batch []*writeOp) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	defer func() {
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
	tx, err := w.db.BeginTx(ctx, nil)
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
			if _, err := tx.StmtContext(ctx, w.savepoint).ExecContext(ctx); err != nil {
				_ = tx.Rollback()
				fail(fmt.Errorf("savepoint: %w", err))
				return
			}
			if errs[i] = o.run(ctx, tx); errs[i] != nil {
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
