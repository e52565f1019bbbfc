// Package sqlite implements store.Store on an embedded SQLite file (modernc.org/sqlite, pure
// Go), for the local process and its admin CLI.
//
// The file is opened in WAL mode with a busy timeout so that a second process can read and
// write it while a server holds it open: readers never block the writer, and writers from
// different processes queue on SQLite's lock instead of failing at once. Inside one process
// every write goes through a pool of exactly one connection, so our own goroutines never
// contend for SQLite's lock; reads use a separate pool of several connections.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/botplatform/api/shared/store"
)

// Store is a store.Store backed by one SQLite file. It is safe for concurrent use, and
// several Stores (in one process or in several) may open the same file.
type Store struct {
	read  *sql.DB // several connections, query_only
	write *sql.DB // exactly one connection: serializes our writes without SQLITE_BUSY
	// points serves Get on query_only connections of its own (points.go).
	points *points
	now    func() time.Time

	putAlways     *sql.Stmt
	putIfAbsent   *sql.Stmt
	putIfLive     *sql.Stmt
	putIfRevision *sql.Stmt
	delAlways     *sql.Stmt
	delIfLive     *sql.Stmt
	delIfRevision *sql.Stmt
	add           *sql.Stmt
	current       *sql.Stmt
	sweep         *sql.Stmt

	// writer applies and commits every write (batch.go).
	writer *Writer

	mu      sync.Mutex
	queries map[string]*sql.Stmt // statements prepared on demand, by SQL text (cachedStmt)

	// Under Full durability the write connection commits as SQLite's NORMAL does (the WAL
	// written, not synced) and the store syncs the WAL itself (durable, Flush): so that
	// concurrent writers share one sync (group commit) and a request's writes can leave
	// theirs to its last one (store.Deferral). nil under Normal.
	wal *WALSync
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Flusher = (*Store)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	now         func() time.Time
	busyTimeout time.Duration
	durability  Durability
}

// Durability is what a commit survives before Open's Store reports it done (SQLite's
// synchronous setting in WAL mode).
type Durability int

const (
	// Full syncs the write-ahead log before a commit is reported done: a write the API
	// acknowledged, and the audit event committed with it, survive a power loss or an OS
	// crash. It is the default. Concurrent commits share a sync (group commit), and the
	// writes of one request made under a store.Deferral share its audit event's.
	Full Durability = iota
	// Normal syncs only at checkpoints: a commit survives the process being killed (kill -9)
	// but the last commits before a power loss or an OS crash can be lost, and the file stays
	// consistent. It is faster (docs/performance.md measures by how much); choose it for a
	// development machine where losing the last seconds of writes on a crash is acceptable.
	Normal
)

// String is the name of d, as the serve command's --durability flag takes it.
func (d Durability) String() string {
	if d == Normal {
		return "normal"
	}
	return "full"
}

// ParseDurability reads a Durability by name ("full" or "normal").
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "full":
		return Full, nil
	case "normal":
		return Normal, nil
	}
	return 0, fmt.Errorf("sqlite: durability %q is neither full nor normal", s)
}

// WithClock sets the clock that decides expiry; tests pass a fake one. The default is
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithBusyTimeout sets how long a write waits for another process's write lock before
// failing with store.ErrUnavailable. The default, 5 s, outlasts any write an admin command
// makes; tests shorten it to observe the failure quickly.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// WithDurability sets what a commit survives; the default is Full.
func WithDurability(d Durability) Option {
	return func(o *options) { o.durability = d }
}

// Open opens (creating if needed) the store file at path and migrates its schema. The
// directory is created with mode 0700 when missing and the file with mode 0600, since it
// holds account data (SQLite gives its -wal and -shm files the database file's mode).
func Open(path string, opts ...Option) (*Store, error) {
	o := options{
		now:         time.Now,
		busyTimeout: 5 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.now == nil:
		return nil, errors.New("sqlite: WithClock needs a clock")
	case o.busyTimeout < 0:
		return nil, errors.New("sqlite: busy timeout must not be negative")
	case o.durability != Full && o.durability != Normal:
		return nil, errors.New("sqlite: unknown durability")
	}
	if err := CreateFile(path); err != nil {
		return nil, err
	}

	// The writes are synced by the store, not by SQLite (see Store.wal).
	write, err := sql.Open("sqlite", dsn(path, o.busyTimeout, Normal, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	read, err := sql.Open("sqlite", dsn(path, o.busyTimeout, o.durability, true))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// Reads of a local file are CPU-bound: more readers than CPUs mostly add memory.
	readConns := min(max(runtime.NumCPU(), 2), 8)
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	read.SetConnMaxLifetime(0)
	read.SetConnMaxIdleTime(0)
	if err := openFile(context.Background(), write, read, o.busyTimeout); err != nil {
		read.Close()
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, mapErr(err))
	}

	pointDB, err := sql.Open("sqlite", dsn(path, o.busyTimeout, o.durability, true))
	if err != nil {
		read.Close()
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{read: read, write: write, points: newPoints(pointDB, readConns), now: o.now,
		queries: make(map[string]*sql.Stmt), wal: NewWALSync(path, o.durability)}
	if s.writer, err = NewWriter(context.Background(), write); err != nil {
		s.points.close()
		read.Close()
		write.Close()
		return nil, fmt.Errorf("sqlite: prepare %s: %w", path, mapErr(err))
	}
	if err := s.prepare(context.Background()); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: prepare %s: %w", path, mapErr(err))
	}
	// The migration committed through the write connection, unsynced.
	if err := s.durable(context.Background(), "migrate"); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

// CreateFile refuses a path that is not a plain file path and creates the file when
// missing, with mode 0600 in a directory of mode 0700: it holds account data (SQLite gives
// its -wal and -shm files the database file's mode). Open calls it; so does any other
// database kept beside the store (the event log's, shared/eventlog/sqlitelog).
func CreateFile(path string) error {
	// A DSN carries its parameters after '?', and a "file:" name or ":memory:" would change
	// how SQLite reads it; a private in-memory database also could not be shared by the
	// two pools. Refuse them rather than open something other than the file asked for.
	if path == "" || path == ":memory:" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return fmt.Errorf("sqlite: %q is not a plain file path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	// SQLite would create the file with the process umask (often 0644): create it first.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return f.Close()
}

// DSN is the connection string of a pool on the file at path (a plain path, see
// CreateFile) with the store's settings: WAL, the busy timeout, the durability, and either
// query_only (readOnly) or transactions that take the write lock at BEGIN. Another database
// beside the store opens its pools with it, so that it is as durable as the store.
func DSN(path string, busy time.Duration, d Durability, readOnly bool) string {
	return dsn(path, busy, d, readOnly)
}

// MapErr marks lock contention that outlasted the busy timeout as store.ErrUnavailable (503,
// clients retry), as the store does with its own errors.
func MapErr(err error) error { return mapErr(err) }

// dsn builds the connection string. Pragmas go in the DSN rather than in one-off Exec calls
// because database/sql opens connections lazily and reopens them after errors: only the DSN
// reaches every connection. _txlock=immediate makes BeginTx take the write lock up front, so
// a transaction never has to upgrade a read snapshot to a write, which in WAL mode can fail
// at once (SQLITE_BUSY_SNAPSHOT) instead of waiting out the busy timeout.
func dsn(path string, busy time.Duration, d Durability, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+strings.ToUpper(d.String())+")")
	if readOnly {
		// A guard, not a lock: a write slipped onto the read pool would bypass the
		// single-writer serialization and could meet SQLITE_BUSY.
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
		// The Writer puts each write of a batch under a savepoint, whose undo pages SQLite
		// keeps in a sub-journal that spills to a temporary file past 64 KiB: a pwrite per
		// page and per page number, every commit. In memory it stays one batch's pages.
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	return path + "?" + q.Encode()
}

// migrations returns the schema steps: step i takes a file from user_version i to i+1.
// Append, never edit: files in the field have already run the earlier steps.
func migrations() [][]string {
	return [][]string{
		{
			// STRICT makes SQLite refuse a value of the wrong type instead of converting it;
			// notably an Add that overflows int64 (SQLite turns it into a REAL) fails rather
			// than storing a float. WITHOUT ROWID stores rows in primary-key order, which is
			// the order every partition query reads.
			`CREATE TABLE IF NOT EXISTS items (
				pk       TEXT    NOT NULL,
				sk       TEXT    NOT NULL,
				revision INTEGER NOT NULL DEFAULT 0,
				data     BLOB,
				count    INTEGER NOT NULL DEFAULT 0,
				expires  INTEGER NOT NULL DEFAULT 0, -- unix seconds; 0 = never
				gsi1pk   TEXT,
				gsi1sk   TEXT,
				gsi2pk   TEXT,
				gsi2sk   TEXT,
				PRIMARY KEY (pk, sk)
			) STRICT, WITHOUT ROWID`,
			// Partial: items without an index key are not in the index, as in DynamoDB's
			// sparse indexes. pk, sk order ties on the index sort key.
			`CREATE INDEX IF NOT EXISTS items_gsi1 ON items (gsi1pk, gsi1sk, pk, sk) WHERE gsi1pk IS NOT NULL`,
			`CREATE INDEX IF NOT EXISTS items_gsi2 ON items (gsi2pk, gsi2sk, pk, sk) WHERE gsi2pk IS NOT NULL`,
			// For DeleteExpired, which would otherwise scan the table.
			`CREATE INDEX IF NOT EXISTS items_expires ON items (expires) WHERE expires != 0`,
		},
	}
}

// openFile migrates the schema and opens a first reader, retrying while SQLite reports
// SQLITE_BUSY, for at most the busy timeout. Opening is where SQLite can answer BUSY without
// waiting on the busy handler: we measured it when two connections turn a new file into WAL
// at once (the journal_mode pragma fails), and SQLite documents it while another process's
// last connection cleans up the WAL on close, and during recovery after a crash. Once our
// write connection is open it holds the file's shared lock, so later connections cannot meet
// these cases.
func openFile(ctx context.Context, write, read *sql.DB, busyTimeout time.Duration) error {
	deadline := time.Now().Add(busyTimeout)
	pause := 2 * time.Millisecond
	for {
		err := migrate(ctx, write)
		if err == nil {
			if err = read.PingContext(ctx); err != nil {
				err = fmt.Errorf("read pool: %w", err)
			}
		}
		if err == nil || !isBusy(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// migrate brings the schema up to date inside one write transaction, so that two processes
// opening a new file at once do not both create it, and a crash leaves the old version.
func migrate(ctx context.Context, db *sql.DB) error {
	steps := migrations()
	schemaVersion := len(steps) // the user_version of a fully migrated file
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	if version > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this program's %d", version, schemaVersion)
	}
	for v := version; v < schemaVersion; v++ {
		for _, stmt := range steps[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("to version %d: %w", v+1, err)
			}
		}
	}
	if version != schemaVersion {
		// PRAGMA takes no bound parameters; the value is our own constant.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
			return fmt.Errorf("set user_version: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// itemColumns is the column order of itemArgs and scanItem.
const itemColumns = `pk, sk, revision, data, count, expires, gsi1pk, gsi1sk, gsi2pk, gsi2sk`

// live is true for a row that has not expired at ?N (unix seconds). A row expires at the
// start of its expiry second, matching store.Item.Expired.
func live(table string, param int) string {
	return fmt.Sprintf(`(%[1]sexpires = 0 OR %[1]sexpires > ?%[2]d)`, table, param)
}

// prepare compiles the fixed statements once. Without it every call parses and plans its SQL
// again, which measured more than twice the cost of the point read itself.
func (s *Store) prepare(ctx context.Context) error {
	const insert = `INSERT INTO items (` + itemColumns + `) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
		ON CONFLICT (pk, sk) DO UPDATE SET revision = excluded.revision, data = excluded.data,
		count = excluded.count, expires = excluded.expires, gsi1pk = excluded.gsi1pk,
		gsi1sk = excluded.gsi1sk, gsi2pk = excluded.gsi2pk, gsi2sk = excluded.gsi2sk`
	const update = `UPDATE items SET revision = ?3, data = ?4, count = ?5, expires = ?6,
		gsi1pk = ?7, gsi1sk = ?8, gsi2pk = ?9, gsi2sk = ?10 WHERE pk = ?1 AND sk = ?2 AND `
	stmts := []struct {
		dst *(*sql.Stmt)
		db  *sql.DB
		sql string
	}{
		{&s.putAlways, s.write, insert},
		// An expired row is replaced as if it were absent.
		{&s.putIfAbsent, s.write, insert + ` WHERE NOT ` + live("items.", 11)},
		{&s.putIfLive, s.write, update + live("", 11)},
		{&s.putIfRevision, s.write, update + live("", 11) + ` AND revision = ?12`},
		{&s.delAlways, s.write, `DELETE FROM items WHERE pk = ?1 AND sk = ?2`},
		{&s.delIfLive, s.write, `DELETE FROM items WHERE pk = ?1 AND sk = ?2 AND ` + live("", 3)},
		{&s.delIfRevision, s.write, `DELETE FROM items WHERE pk = ?1 AND sk = ?2 AND ` + live("", 3) + ` AND revision = ?4`},
		{&s.add, s.write, addSQL(1) + ` RETURNING count`},
		{&s.current, s.write, `SELECT revision FROM items WHERE pk = ?1 AND sk = ?2 AND ` + live("", 3)},
		{&s.sweep, s.write, `DELETE FROM items WHERE (pk, sk) IN
			(SELECT pk, sk FROM items WHERE expires != 0 AND expires <= ?1 LIMIT ?2)`},
	}
	for _, st := range stmts {
		p, err := st.db.PrepareContext(ctx, st.sql)
		if err != nil {
			return fmt.Errorf("%w in %s", err, st.sql)
		}
		*st.dst = p
	}
	return nil
}

// Close releases the store. Calls still running finish first (database/sql waits for them);
// calls made afterwards fail.
func (s *Store) Close() error {
	if s.writer != nil {
		s.writer.Close() // the writes queued before commit first
	}
	s.mu.Lock()
	for k, st := range s.queries {
		st.Close()
		delete(s.queries, k)
	}
	s.mu.Unlock()
	for _, st := range []*sql.Stmt{s.putAlways, s.putIfAbsent, s.putIfLive, s.putIfRevision,
		s.delAlways, s.delIfLive, s.delIfRevision, s.add, s.current, s.sweep} {
		if st != nil {
			st.Close()
		}
	}
	return errors.Join(s.points.close(), s.read.Close(), s.write.Close())
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key store.Key) (store.Item, error) {
	if err := key.Validate(); err != nil {
		return store.Item{}, fmt.Errorf("sqlite: get: %w", err)
	}
	it := store.Item{Key: key}
	found, err := s.points.get(ctx, []driver.NamedValue{
		{Ordinal: 1, Value: key.PK}, {Ordinal: 2, Value: key.SK}, {Ordinal: 3, Value: s.now().Unix()},
	}, func(row []driver.Value) error { return scanPoint(row, &it) })
	if err != nil {
		return store.Item{}, fmt.Errorf("sqlite: get: %w", mapErr(err))
	}
	if !found {
		return store.Item{}, store.ErrNotFound
	}
	return it, nil
}

// Put implements store.Store. Each condition kind is one statement, so the check and the
// write are atomic without a transaction; a condition that fails changes no row.
func (s *Store) Put(ctx context.Context, item store.Item, cond store.Condition) error {
	args, err := itemArgs(item)
	if err != nil {
		return fmt.Errorf("sqlite: put: %w", err)
	}
	now := s.now().Unix()
	var st *sql.Stmt
	switch cond.Kind {
	case store.CondNone:
		st = s.putAlways
	case store.CondMustNotExist:
		st, args = s.putIfAbsent, append(args, now)
	case store.CondMustExist:
		st, args = s.putIfLive, append(args, now)
	case store.CondRevisionIs:
		st, args = s.putIfRevision, append(args, now, cond.Revision)
	default:
		return fmt.Errorf("sqlite: put: unknown condition kind %d", cond.Kind)
	}
	return s.execConditional(ctx, "put", st, args...)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key store.Key, cond store.Condition) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("sqlite: delete: %w", err)
	}
	now := s.now().Unix()
	switch cond.Kind {
	case store.CondNone:
		err := s.writer.Submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.StmtContext(ctx, s.delAlways).ExecContext(ctx, key.PK, key.SK)
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: delete: %w", mapErr(err))
		}
		return s.durable(ctx, "delete")
	case store.CondMustExist:
		return s.execConditional(ctx, "delete", s.delIfLive, key.PK, key.SK, now)
	case store.CondRevisionIs:
		return s.execConditional(ctx, "delete", s.delIfRevision, key.PK, key.SK, now, cond.Revision)
	case store.CondMustNotExist:
		// Holds when nothing live is there, in which case the delete only clears an
		// expired row: rare enough to take the general path.
		return s.Transact(ctx, []store.Write{store.DeleteOp(key, cond)})
	default:
		return fmt.Errorf("sqlite: delete: unknown condition kind %d", cond.Kind)
	}
}

// execConditional runs a statement whose WHERE clause is the condition: no row changed means
// the condition did not hold.
func (s *Store) execConditional(ctx context.Context, op string, st *sql.Stmt, args ...any) error {
	err := s.writer.Submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return &store.ConditionError{Index: 0}
		}
		return nil
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		return ce
	}
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, mapErr(err))
	}
	return s.durable(ctx, op)
}

// Add implements store.Store.
func (s *Store) Add(ctx context.Context, key store.Key, delta int64, expiresAt time.Time) (int64, error) {
	if err := key.Validate(); err != nil {
		return 0, fmt.Errorf("sqlite: add: %w", err)
	}
	now := s.now().Unix()
	var n int64
	err := s.writer.Submit(ctx, func(ctx context.Context, tx *sql.Tx) (err error) {
		n, err = s.addOn(ctx, tx.StmtContext(ctx, s.add), key, delta, expiresAt, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: add: %w", mapErr(err))
	}
	return n, s.durable(ctx, "add")
}

// addSQL is the upsert of n increments, bound as ?2..?4n+1 (key, delta, expiry of each) at
// the time ?1. The conflict branch restarts an expired row from nothing, because an expired
// item counts as absent; SET expressions all read the old row, so the order is free. SQLite
// applies a VALUES list's rows in turn, so each row's conflict sees the rows before it.
func addSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO items (pk, sk, count, expires) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(?%d, ?%d, ?%d, ?%d)", 4*i+2, 4*i+3, 4*i+4, 4*i+5)
	}
	fmt.Fprintf(&b, ` ON CONFLICT (pk, sk) DO UPDATE SET
		count    = CASE WHEN %[1]s THEN items.count + excluded.count ELSE excluded.count END,
		expires  = CASE WHEN excluded.expires != 0 THEN excluded.expires WHEN %[1]s THEN items.expires ELSE 0 END,
		revision = CASE WHEN %[1]s THEN items.revision ELSE 0 END,
		data     = CASE WHEN %[1]s THEN items.data END,
		gsi1pk   = CASE WHEN %[1]s THEN items.gsi1pk END,
		gsi1sk   = CASE WHEN %[1]s THEN items.gsi1sk END,
		gsi2pk   = CASE WHEN %[1]s THEN items.gsi2pk END,
		gsi2sk   = CASE WHEN %[1]s THEN items.gsi2sk END`, live("items.", 1))
	return b.String()
}

// addAll applies a transaction's increments (at most store.MaxTransactWrites, keys distinct)
// with st, the statement of addSQL(len(adds)).
func addAll(ctx context.Context, st *sql.Stmt, adds []*store.Increment, now int64) error {
	args := make([]any, 1, 1+4*len(adds))
	args[0] = now
	for _, a := range adds {
		args = append(args, a.Key.PK, a.Key.SK, a.Delta, unixExpiry(a.ExpiresAt))
	}
	if _, err := st.ExecContext(ctx, args...); err != nil {
		return fmt.Errorf("increments: %w", err)
	}
	return nil
}

func (s *Store) addOn(ctx context.Context, st *sql.Stmt, key store.Key, delta int64, expiresAt time.Time, now int64) (int64, error) {
	rows, err := st.QueryContext(ctx, now, key.PK, key.SK, delta, unixExpiry(expiresAt))
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return 0, errors.New("upsert returned no row")
	}
	if err := rows.Scan(&n); err != nil {
		return 0, err
	}
	// Step to the end so that the statement completes (and, outside a transaction,
	// commits) before we report success; an error there would otherwise be lost.
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, rows.Close()
}

// Transact implements store.Store. The transaction holds the write lock from BEGIN (see
// dsn), so the conditions read inside it cannot change before the writes land.
func (s *Store) Transact(ctx context.Context, writes []store.Write) error {
	// Keys, items and condition kinds too: nothing below checks them again.
	if err := store.ValidateTransaction(writes); err != nil {
		return fmt.Errorf("sqlite: transact: %w", err)
	}
	now := s.now().Unix()
	// The increments, when there are several, go in one statement after the other writes:
	// they take no condition and touch keys no other write does, so their order is free,
	// and one statement costs a fraction of one each (a request meters several counters).
	var adds []*store.Increment
	for _, w := range writes {
		if w.Add != nil {
			adds = append(adds, w.Add)
		}
	}
	var addStmt *sql.Stmt
	if len(adds) < 2 {
		adds = nil
	} else {
		// Prepared here, not inside the batch, which holds the write pool's one connection.
		var err error
		if addStmt, err = s.cachedStmt(ctx, s.write, addSQL(len(adds))); err != nil {
			return fmt.Errorf("sqlite: transact: %w", mapErr(err))
		}
	}
	err := s.writer.Submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for i, w := range writes {
			if w.Add != nil && adds != nil {
				continue
			}
			if err := s.apply(ctx, tx, w, now); err != nil {
				var ce *store.ConditionError
				if errors.As(err, &ce) {
					return &store.ConditionError{Index: i}
				}
				return fmt.Errorf("write %d: %w", i, err)
			}
		}
		if adds != nil {
			return addAll(ctx, tx.StmtContext(ctx, addStmt), adds, now)
		}
		return nil
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		return ce
	}
	if err != nil {
		return fmt.Errorf("sqlite: transact: %w", mapErr(err))
	}
	return s.durable(ctx, "transact")
}

// apply performs one write of a transaction, checking its condition in Go against the row
// as it is inside the transaction.
func (s *Store) apply(ctx context.Context, tx *sql.Tx, w store.Write, now int64) error {
	key, _ := w.Target() // validated by the caller
	if w.Cond.Kind != store.CondNone {
		var cur *store.Item
		var rev int64
		err := tx.StmtContext(ctx, s.current).QueryRowContext(ctx, key.PK, key.SK, now).Scan(&rev)
		switch {
		case err == nil:
			cur = &store.Item{Key: key, Revision: rev}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if !w.Cond.Holds(cur) {
			return &store.ConditionError{}
		}
	}
	switch {
	case w.Put != nil:
		args, err := itemArgs(*w.Put)
		if err != nil {
			return err
		}
		_, err = tx.StmtContext(ctx, s.putAlways).ExecContext(ctx, args...)
		return err
	case w.Delete != nil:
		_, err := tx.StmtContext(ctx, s.delAlways).ExecContext(ctx, key.PK, key.SK)
		return err
	case w.Add != nil:
		_, err := s.addOn(ctx, tx.StmtContext(ctx, s.add), key, w.Add.Delta, w.Add.ExpiresAt, now)
		return err
	default: // Check: the condition was the whole point
		return nil
	}
}

// DeleteExpired removes up to limit items whose expiry has passed and reports how many it
// removed. Reads already ignore expired items; this only reclaims their space, the job
// DynamoDB's TTL sweeper does in AWS. The local process calls it from a timer; a small
// limit keeps each call's hold on the write lock short.
func (s *Store) DeleteExpired(ctx context.Context, limit int) (int64, error) {
	if limit < 1 {
		return 0, errors.New("sqlite: delete expired: limit must be positive")
	}
	now := s.now().Unix()
	var n int64
	err := s.writer.Submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, s.sweep).ExecContext(ctx, now, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete expired: %w", mapErr(err))
	}
	if n == 0 {
		return 0, nil
	}
	return n, s.durable(ctx, "delete expired")
}

// durable makes a write that has just committed as durable as the store's setting promises
// before the write is reported done: under Full, synced, or left to the context's open
// store.Deferral to sync with a later write of the same request.
func (s *Store) durable(ctx context.Context, op string) error {
	if err := s.wal.Committed(ctx, op); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return nil
}

// Flush implements store.Flusher: it returns once every commit up to mark is durable
// (WALSync.Flush).
func (s *Store) Flush(ctx context.Context, mark uint64) error { return s.wal.Flush(ctx, mark) }

// mapErr marks lock contention that outlasted the busy timeout as store.ErrUnavailable, so
// callers answer 503 and clients retry, instead of 500.
func mapErr(err error) error {
	if isBusy(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// isBusy reports SQLITE_BUSY and SQLITE_LOCKED, including their extended codes (such as
// SQLITE_BUSY_SNAPSHOT), which keep the primary code in the low byte.
func isBusy(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// itemArgs returns the item's values in itemColumns order.
func itemArgs(it store.Item) ([]any, error) {
	if err := it.Validate(); err != nil {
		return nil, err
	}
	args := make([]any, 10, 12)
	args[0], args[1], args[2], args[3] = it.PK, it.SK, it.Revision, it.Data
	args[4], args[5] = it.Count, unixExpiry(it.ExpiresAt)
	args[6], args[7] = nullable(it.GSI1.PK), nullable(it.GSI1.SK)
	args[8], args[9] = nullable(it.GSI2.PK), nullable(it.GSI2.SK)
	return args, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// unixExpiry encodes an expiry in the expires column, where 0 means never. The Unix epoch
// itself would read as "never", so it is stored one second earlier: it is long past either
// way.
func unixExpiry(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if u := t.Unix(); u != 0 {
		return u
	}
	return -1
}

// scanItem reads one row selected as itemColumns.
func scanItem(row interface{ Scan(...any) error }) (store.Item, error) {
	var (
		it                     store.Item
		expires                int64
		g1pk, g1sk, g2pk, g2sk sql.NullString
	)
	if err := row.Scan(&it.PK, &it.SK, &it.Revision, &it.Data, &it.Count, &expires, &g1pk, &g1sk, &g2pk, &g2sk); err != nil {
		return store.Item{}, err
	}
	setColumns(&it, expires, [4]string{g1pk.String, g1sk.String, g2pk.String, g2sk.String})
	return it, nil
}

// setColumns sets what an item's stored expiry and index key columns say (NULL read as "").
func setColumns(it *store.Item, expires int64, gsi [4]string) {
	if expires != 0 {
		it.ExpiresAt = time.Unix(expires, 0).UTC()
	}
	it.GSI1 = store.IndexKey{PK: gsi[0], SK: gsi[1]}
	it.GSI2 = store.IndexKey{PK: gsi[2], SK: gsi[3]}
}
