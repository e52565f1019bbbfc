// Package sqlitelog is the event log of the local process: indexed tables in an SQLite file
// of their own beside the store's (modernc.org/sqlite, opened with the store's settings, so
// as durable as the store: under full durability an append is on disk before it returns,
// unless it was made under an open store.Deferral, which then holds its sync as it holds the
// store's; the log syncs its WAL itself, as the store does, so that concurrent appends share
// a sync).
//
// A file of its own, not the store's: events are the busiest writes of the platform (every
// message a bot sends is one), and SQLite has one write lock per file, so the log's appends
// do not queue behind the store's writes nor the store's behind a report's; and a million
// events do not grow the file every request reads.
//
// The layout is chosen for the reports (shared/eventlog: Scan of a few names over a range):
//
//	bots          id INTEGER PRIMARY KEY, bot TEXT UNIQUE      a bot's id in the other tables
//	events        bot, name, at (Unix ms), id, subscriber, channel, meta (the rest, meta.go)
//	              PRIMARY KEY (bot, name, at, id), WITHOUT ROWID
//	event_ids     UNIQUE (bot, id)                              idempotent appends
//	events_at     (bot, at, id)                                 scans of every name
//	events_sub    (bot, subscriber, at, id)                     scans of one subscriber
//	event_counts  bot, day (Unix days), name, channel, count     the aggregates of Counts
//
// The table is clustered on (bot, name, at, id): the events of one name over a range are
// contiguous rows read in order, and a scan of several names is SQLite's merge of one ordered
// range per name (a compound SELECT), with no sort. Times are integers, the bot is an
// integer, and what reports rarely read is packed in one small column, so a row is small and
// a scan makes few calls into SQLite per row. Scans read rows from the driver itself
// (database/sql's Conn.Raw): database/sql's conversions of each value doubled their cost.
package sqlitelog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// Log is an eventlog.Log on an SQLite file. It is safe for concurrent use, and several Logs
// (in one process or in several) may open the same file.
type Log struct {
	read  *sql.DB // several connections, query_only
	write *sql.DB // one connection: our writes never meet SQLITE_BUSY from each other
	// writer commits appends, batching concurrent ones into one transaction.
	writer *sqlite.Writer
	// wal syncs the commits of write under full durability (nil under normal): the write
	// connection commits as synchronous=NORMAL does, and concurrent appends share a sync.
	wal *sqlite.WALSync

	insert, count, botID, newBot *sql.Stmt
}

var (
	_ eventlog.Log      = (*Log)(nil)
	_ eventlog.Reporter = (*Log)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	durability  sqlite.Durability
	busyTimeout time.Duration
}

// WithDurability sets what a commit survives (the store's setting, sqlite.Full by default).
func WithDurability(d sqlite.Durability) Option { return func(o *options) { o.durability = d } }

// WithBusyTimeout sets how long a write waits for another process's write lock (5 s by
// default, as the store).
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// Open opens (creating if needed) the event log file at path and migrates its schema.
func Open(path string, opts ...Option) (*Log, error) {
	o := options{busyTimeout: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.durability != sqlite.Full && o.durability != sqlite.Normal {
		return nil, errors.New("sqlitelog: unknown durability")
	}
	if err := sqlite.CreateFile(path); err != nil {
		return nil, err
	}
	// The commits are synced by wal, not by SQLite.
	write, err := sql.Open("sqlite", sqlite.DSN(path, o.busyTimeout, sqlite.Normal, false))
	if err != nil {
		return nil, fmt.Errorf("sqlitelog: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	read, err := sql.Open("sqlite", sqlite.DSN(path, o.busyTimeout, o.durability, true))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlitelog: open %s: %w", path, err)
	}
	conns := min(max(runtime.NumCPU(), 2), 8)
	read.SetMaxOpenConns(conns)
	read.SetMaxIdleConns(conns)
	read.SetConnMaxLifetime(0)
	read.SetConnMaxIdleTime(0)
	l := &Log{read: read, write: write, wal: sqlite.NewWALSync(path, o.durability)}
	if err := migrate(context.Background(), write, o.busyTimeout); err != nil {
		l.Close()
		return nil, fmt.Errorf("sqlitelog: open %s: %w", path, sqlite.MapErr(err))
	}
	if err := l.wal.Committed(context.Background(), "migrate"); err != nil {
		l.Close()
		return nil, fmt.Errorf("sqlitelog: open %s: %w", path, err)
	}
	if err := l.prepare(context.Background()); err != nil {
		l.Close()
		return nil, fmt.Errorf("sqlitelog: prepare %s: %w", path, sqlite.MapErr(err))
	}
	if l.writer, err = sqlite.NewWriter(context.Background(), write); err != nil {
		l.Close()
		return nil, fmt.Errorf("sqlitelog: prepare %s: %w", path, sqlite.MapErr(err))
	}
	return l, nil
}

// migrations are the schema steps: step i takes a file from user_version i to i+1. Append,
// never edit.
func migrations() [][]string {
	return [][]string{{
		`CREATE TABLE IF NOT EXISTS bots (
			id  INTEGER PRIMARY KEY,
			bot TEXT NOT NULL UNIQUE
		) STRICT`,
		`CREATE TABLE IF NOT EXISTS events (
			bot              INTEGER NOT NULL,
			name             TEXT    NOT NULL,
			at               INTEGER NOT NULL, -- Unix milliseconds
			id               TEXT    NOT NULL,
			subscriber       TEXT    NOT NULL, -- '' when none
			channel          TEXT    NOT NULL,
			meta             BLOB    NOT NULL, -- source, client id, properties, revenue (meta.go)
			PRIMARY KEY (bot, name, at, id)
		) STRICT, WITHOUT ROWID`,
		`CREATE UNIQUE INDEX IF NOT EXISTS event_ids ON events (bot, id)`,
		`CREATE INDEX IF NOT EXISTS events_at ON events (bot, at, id)`,
		`CREATE INDEX IF NOT EXISTS events_sub ON events (bot, subscriber, at, id)`,
		`CREATE TABLE IF NOT EXISTS event_counts (
			bot     INTEGER NOT NULL,
			day     INTEGER NOT NULL, -- days since the Unix epoch, UTC
			name    TEXT    NOT NULL,
			channel TEXT    NOT NULL,
			count   INTEGER NOT NULL,
			PRIMARY KEY (bot, day, name, channel)
		) STRICT, WITHOUT ROWID`,
	}}
}

// migrate brings the schema up to date in one write transaction, retrying while the file is
// busy being opened by another process (see the store's openFile), for at most busy.
func migrate(ctx context.Context, db *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	pause := 2 * time.Millisecond
	for {
		err := migrateOnce(ctx, db)
		if err == nil || !errors.Is(sqlite.MapErr(err), store.ErrUnavailable) || time.Now().Add(pause).After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func migrateOnce(ctx context.Context, db *sql.DB) error {
	steps := migrations()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > len(steps) {
		return fmt.Errorf("schema version %d is newer than this program's %d", version, len(steps))
	}
	for v := version; v < len(steps); v++ {
		for _, stmt := range steps[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("to version %d: %w", v+1, err)
			}
		}
	}
	if version != len(steps) {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(steps))); err != nil {
			return err
		}
	}
	return tx.Commit()
}

const eventColumns = `name, at, id, subscriber, channel, meta`

func (l *Log) prepare(ctx context.Context) error {
	for _, st := range []struct {
		dst **sql.Stmt
		db  *sql.DB
		sql string
	}{
		// DO NOTHING on either key: the (bot, id) of an event stored already, whatever its
		// name and time now.
		{&l.insert, l.write, `INSERT INTO events (bot, ` + eventColumns + `)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING`},
		{&l.count, l.write, `INSERT INTO event_counts (bot, day, name, channel, count) VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (bot, day, name, channel) DO UPDATE SET count = count + excluded.count`},
		{&l.newBot, l.write, `INSERT INTO bots (bot) VALUES (?1) ON CONFLICT (bot) DO UPDATE SET bot = bot RETURNING id`},
		{&l.botID, l.read, `SELECT id FROM bots WHERE bot = ?1`},
	} {
		p, err := st.db.PrepareContext(ctx, st.sql)
		if err != nil {
			return fmt.Errorf("%w in %s", err, st.sql)
		}
		*st.dst = p
	}
	return nil
}

// Close releases the log.
func (l *Log) Close() error {
	if l.writer != nil {
		l.writer.Close() // the appends queued before commit first
	}
	for _, st := range []*sql.Stmt{l.insert, l.count, l.botID, l.newBot} {
		if st != nil {
			st.Close()
		}
	}
	return errors.Join(l.read.Close(), l.write.Close())
}

const msPerDay = 24 * 60 * 60 * 1000

type countKey struct {
	bot           int64
	day           int64
	name, channel string
}

// Append implements eventlog.Log.
func (l *Log) Append(ctx context.Context, events ...eventlog.Event) (int, error) {
	added, err := l.AppendNew(ctx, events...)
	return eventlog.Count(added), err
}

// AppendNew implements eventlog.Reporter: one write transaction for the batch, the
// aggregates of the new events included.
func (l *Log) AppendNew(ctx context.Context, events ...eventlog.Event) ([]bool, error) {
	added, err := l.appendNew(ctx, events)
	if err != nil {
		return nil, err
	}
	return added, nil
}

func (l *Log) appendNew(ctx context.Context, events []eventlog.Event) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(events) > eventlog.MaxEventsPerAppend {
		return nil, fmt.Errorf("%w: %d events in one append, more than %d", eventlog.ErrInvalid, len(events), eventlog.MaxEventsPerAppend)
	}
	added := make([]bool, len(events))
	if len(events) == 0 {
		return added, nil
	}
	rows := make([][]any, len(events))
	for i, e := range events {
		if err := eventlog.Validate(e); err != nil {
			return nil, err
		}
		r, err := eventArgs(e)
		if err != nil {
			return nil, err
		}
		rows[i] = r
	}
	err := l.writer.Submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		bots := map[string]int64{}
		counts := map[countKey]int64{}
		insert := tx.StmtContext(ctx, l.insert)
		for i, e := range events {
			bot, ok := bots[e.BotID]
			if !ok {
				if err := tx.StmtContext(ctx, l.newBot).QueryRowContext(ctx, e.BotID).Scan(&bot); err != nil {
					return err
				}
				bots[e.BotID] = bot
			}
			rows[i][0] = bot
			res, err := insert.ExecContext(ctx, rows[i]...)
			if err != nil {
				return err
			}
			if k, err := res.RowsAffected(); err != nil {
				return err
			} else if k == 1 {
				added[i] = true
				counts[countKey{bot, rows[i][2].(int64) / msPerDay, e.Name, e.Channel}]++
			}
		}
		count := tx.StmtContext(ctx, l.count)
		for k, c := range counts {
			if _, err := count.ExecContext(ctx, k.bot, k.day, k.name, k.channel, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitelog: append: %w", sqlite.MapErr(err))
	}
	if err := l.wal.Committed(ctx, "append"); err != nil {
		return nil, fmt.Errorf("sqlitelog: %w", err)
	}
	return added, nil
}

// eventArgs are the insert's arguments; the first, the bot's id, is set in the transaction.
func eventArgs(e eventlog.Event) ([]any, error) {
	meta, err := encodeMeta(e)
	if err != nil {
		return nil, err
	}
	return []any{nil, e.Name, e.At.UnixMilli(), e.ID, e.SubscriberID, e.Channel, meta}, nil
}

// bot returns the bot's id in the tables, ok false when it has no event.
func (l *Log) bot(ctx context.Context, bot string) (int64, bool, error) {
	var id int64
	err := l.botID.QueryRowContext(ctx, bot).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, sqlite.MapErr(err)
	}
	return id, true, nil
}

// maxMergedNames is the most names a scan merges as one ordered range each (SQLite allows
// 500 terms in a compound SELECT); beyond it, the scan reads every name in time order
// (events_at) and keeps the names asked for.
const maxMergedNames = 64

// scanSQL builds the scan of q for the bot ?1, in [?2, ?3), after (?2, ?4) when AfterID is
// set, of subscriber ?5 when given; names follow from ?6.
func scanSQL(q eventlog.Query) (string, []any) {
	args := []any{nil, q.From.UnixMilli(), q.To.UnixMilli(), q.AfterID, q.SubscriberID}
	where := `bot = ?1 AND at >= ?2 AND at < ?3`
	if q.AfterID != "" {
		where += ` AND (at > ?2 OR id > ?4)`
	}
	names := make([]string, len(q.Names))
	for i, n := range q.Names {
		args = append(args, n)
		names[i] = fmt.Sprintf("?%d", len(args))
	}
	in := ` AND name IN (` + strings.Join(names, ", ") + `)`
	switch {
	case q.SubscriberID != "":
		where += ` AND subscriber = ?5`
		if len(names) > 0 {
			where += in
		}
		return `SELECT ` + eventColumns + ` FROM events INDEXED BY events_sub WHERE ` + where + ` ORDER BY at, id`, args
	case len(names) == 0:
		return `SELECT ` + eventColumns + ` FROM events INDEXED BY events_at WHERE ` + where + ` ORDER BY at, id`, args
	case len(names) > maxMergedNames:
		return `SELECT ` + eventColumns + ` FROM events INDEXED BY events_at WHERE ` + where + in + ` ORDER BY at, id`, args
	}
	arms := make([]string, len(names))
	for i, p := range names {
		arms[i] = `SELECT ` + eventColumns + ` FROM events WHERE ` + where + ` AND name = ` + p
	}
	return strings.Join(arms, ` UNION ALL `) + ` ORDER BY at, id`, args
}

// Scan implements eventlog.Log.
func (l *Log) Scan(ctx context.Context, q eventlog.Query, fn func(eventlog.Event) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !q.From.Before(q.To) {
		return nil
	}
	bot, ok, err := l.bot(ctx, q.BotID)
	if err != nil || !ok {
		return err
	}
	query, args := scanSQL(q)
	args[0] = bot
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	conn, err := l.read.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlitelog: scan: %w", sqlite.MapErr(err))
	}
	defer conn.Close()
	var fnErr error
	err = conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return errors.New("the driver cannot query")
		}
		rows, err := qc.QueryContext(ctx, query, named)
		if err != nil {
			return err
		}
		defer rows.Close()
		fnErr, err = scanRows(ctx, rows, q.BotID, fn)
		return err
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return fmt.Errorf("sqlitelog: scan: %w", sqlite.MapErr(err))
	}
	return nil
}

// scanBatch is how many rows the reader hands over at a time.
const scanBatch = 512

// row is one row of a scan's columns, as the driver returns them.
type row [6]driver.Value

// scanRows calls fn with each row's event: fn's error comes back as fnErr, a read's as err.
//
// Reading a row (SQLite's work) and making it an event and calling fn (ours and the caller's)
// cost about the same, so they run on two goroutines: this one reads rows in batches and
// hands them over, another makes events and calls fn, one at a time and in order. Scan
// returns only after the last call of fn, so the caller sees every effect of fn.
func scanRows(ctx context.Context, rows driver.Rows, bot string, fn func(eventlog.Event) error) (fnErr, err error) {
	full := make(chan []row, 2)
	free := make(chan []row, 3)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- callEach(full, free, stop, bot, fn)
	}()
	err = readRows(ctx, rows, full, free, stop)
	close(full)
	fnErr = <-done
	return fnErr, err
}

// readRows reads every row into batches sent on full, until the rows end or stop closes.
func readRows(ctx context.Context, rows driver.Rows, full, free chan []row, stop chan struct{}) error {
	batch := make([]row, 0, scanBatch)
	send := func() bool {
		select {
		case full <- batch:
		case <-stop:
			return false
		}
		select {
		case batch = <-free:
			batch = batch[:0]
		default:
			batch = make([]row, 0, scanBatch)
		}
		return true
	}
	for {
		batch = append(batch, row{})
		if err := rows.Next(batch[len(batch)-1][:]); err == io.EOF {
			batch = batch[:len(batch)-1]
			break
		} else if err != nil {
			return err
		}
		if len(batch) == scanBatch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !send() {
				return nil
			}
		}
	}
	if len(batch) > 0 {
		send()
	}
	return nil
}

// callEach makes events of the batches on full and calls fn with each. On fn's first error
// (or a malformed row) it closes stop, lets the reader end, and returns the error.
func callEach(full, free chan []row, stop chan struct{}, bot string, fn func(eventlog.Event) error) error {
	var failed error
	// Names, subscribers and channels repeat from row to row: keep one string of each.
	intern := map[string]string{}
	same := func(v driver.Value) string {
		s, _ := v.(string)
		if v, ok := intern[s]; ok {
			return v
		}
		if len(intern) < 100_000 {
			intern[s] = s
		}
		return s
	}
	for batch := range full {
		if failed != nil {
			continue // the reader is stopping; drain what it sent before it saw stop
		}
		for i := range batch {
			r := &batch[i]
			at, ok1 := r[1].(int64)
			id, ok2 := r[2].(string)
			meta, ok3 := r[5].([]byte)
			if !ok1 || !ok2 || !ok3 {
				failed = fmt.Errorf("sqlitelog: scan: a row of unexpected types %T, %T, %T", r[1], r[2], r[5])
				break
			}
			e := eventlog.Event{ID: id, BotID: bot, Name: same(r[0]), At: time.UnixMilli(at).UTC(),
				SubscriberID: same(r[3]), Channel: same(r[4])}
			if err := decodeMeta(meta, &e); err != nil {
				failed = fmt.Errorf("sqlitelog: scan: event %s: %w", e.ID, err)
				break
			}
			if err := fn(e); err != nil {
				failed = err
				break
			}
		}
		if failed != nil {
			close(stop)
			continue
		}
		clear(batch)
		select {
		case free <- batch:
		default:
		}
	}
	return failed
}

// days returns the UTC days [from, to) touches, as Unix days: [first, end).
func days(from, to time.Time) (first, end int64) {
	first = floorDiv(from.UnixMilli(), msPerDay)
	end = floorDiv(to.UnixMilli()-1, msPerDay) + 1
	return first, end
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Counts implements eventlog.Log from event_counts.
func (l *Log) Counts(ctx context.Context, q eventlog.Query) ([]eventlog.DayCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !q.From.Before(q.To) {
		return nil, nil
	}
	bot, ok, err := l.bot(ctx, q.BotID)
	if err != nil || !ok {
		return nil, err
	}
	first, end := days(q.From, q.To)
	args := []any{bot, first, end}
	query := `SELECT day, name, channel, count FROM event_counts WHERE bot = ?1 AND day >= ?2 AND day < ?3`
	if len(q.Names) > 0 {
		ps := make([]string, len(q.Names))
		for i, n := range q.Names {
			args = append(args, n)
			ps[i] = fmt.Sprintf("?%d", len(args))
		}
		query += ` AND name IN (` + strings.Join(ps, ", ") + `)`
	}
	rows, err := l.read.QueryContext(ctx, query+` ORDER BY day, name, channel`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitelog: counts: %w", sqlite.MapErr(err))
	}
	defer rows.Close()
	var out []eventlog.DayCount
	for rows.Next() {
		var day int64
		var c eventlog.DayCount
		if err := rows.Scan(&day, &c.Name, &c.Channel, &c.Count); err != nil {
			return nil, fmt.Errorf("sqlitelog: counts: %w", sqlite.MapErr(err))
		}
		c.Day = time.UnixMilli(day * msPerDay).UTC().Format(time.DateOnly)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitelog: counts: %w", sqlite.MapErr(err))
	}
	return out, nil
}

// DeleteBatch is the most rows one DeleteBot call deletes, and the most events one
// DeleteSubscriber call deletes: one short write transaction.
const DeleteBatch = 2000

// DeleteBot implements eventlog.Log: the events first, then the aggregates, then the bot's
// row, DeleteBatch rows at most per call.
func (l *Log) DeleteBot(ctx context.Context, botID string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	tx, err := l.write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("sqlitelog: delete bot: %w", sqlite.MapErr(err))
	}
	defer tx.Rollback()
	var bot int64
	err = tx.QueryRowContext(ctx, `SELECT id FROM bots WHERE bot = ?1`, botID).Scan(&bot)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlitelog: delete bot: %w", sqlite.MapErr(err))
	}
	budget := int64(DeleteBatch)
	for _, del := range []string{
		`DELETE FROM events WHERE (bot, name, at, id) IN (SELECT bot, name, at, id FROM events WHERE bot = ?1 LIMIT ?2)`,
		`DELETE FROM event_counts WHERE (bot, day, name, channel) IN (SELECT bot, day, name, channel FROM event_counts WHERE bot = ?1 LIMIT ?2)`,
	} {
		res, err := tx.ExecContext(ctx, del, bot, budget)
		if err != nil {
			return false, fmt.Errorf("sqlitelog: delete bot: %w", sqlite.MapErr(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return false, fmt.Errorf("sqlitelog: delete bot: %w", sqlite.MapErr(err))
		}
		if budget -= n; budget == 0 {
			return false, l.commit(ctx, tx)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM bots WHERE id = ?1`, bot); err != nil {
		return false, fmt.Errorf("sqlitelog: delete bot: %w", sqlite.MapErr(err))
	}
	return true, l.commit(ctx, tx)
}

// DeleteSubscriber implements eventlog.Log: at most DeleteBatch of the subscriber's events
// a call (found through events_sub), each with its id (the row is the id: event_ids indexes
// it), and their counts taken off event_counts in the same transaction; a count that
// reaches zero goes.
func (l *Log) DeleteSubscriber(ctx context.Context, botID, subscriber string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := eventlog.CheckDeleteSubscriber(botID, subscriber); err != nil {
		return false, err
	}
	tx, err := l.write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("sqlitelog: delete subscriber: %w", sqlite.MapErr(err))
	}
	defer tx.Rollback()
	var bot int64
	err = tx.QueryRowContext(ctx, `SELECT id FROM bots WHERE bot = ?1`, botID).Scan(&bot)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlitelog: delete subscriber: %w", sqlite.MapErr(err))
	}
	rows, err := tx.QueryContext(ctx, `DELETE FROM events WHERE (bot, name, at, id) IN (
			SELECT bot, name, at, id FROM events INDEXED BY events_sub WHERE bot = ?1 AND subscriber = ?2 LIMIT ?3)
		RETURNING name, at, channel`, bot, subscriber, DeleteBatch)
	if err != nil {
		return false, fmt.Errorf("sqlitelog: delete subscriber: %w", sqlite.MapErr(err))
	}
	counts := map[countKey]int64{}
	n := 0
	for rows.Next() {
		var k countKey
		var at int64
		if err := rows.Scan(&k.name, &at, &k.channel); err != nil {
			rows.Close()
			return false, fmt.Errorf("sqlitelog: delete subscriber: %w", sqlite.MapErr(err))
		}
		k.bot, k.day = bot, at/msPerDay // as Append counts it
		counts[k]++
		n++
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, fmt.Errorf("sqlitelog: delete subscriber: %w", sqlite.MapErr(err))
	}
	for k, c := range counts {
		if _, err := tx.ExecContext(ctx, `UPDATE event_counts SET count = count - ?5
			WHERE bot = ?1 AND day = ?2 AND name = ?3 AND channel = ?4`, k.bot, k.day, k.name, k.channel, c); err != nil {
			return false, fmt.Errorf("sqlitelog: delete subscriber: %w", sqlite.MapErr(err))
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM event_counts
			WHERE bot = ?1 AND day = ?2 AND name = ?3 AND channel = ?4 AND count <= 0`, k.bot, k.day, k.name, k.channel); err != nil {
			return false, fmt.Errorf("sqlitelog: delete subscriber: %w", sqlite.MapErr(err))
		}
	}
	return n < DeleteBatch, l.commit(ctx, tx)
}

// commit commits tx and makes it durable (wal).
func (l *Log) commit(ctx context.Context, tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitelog: commit: %w", sqlite.MapErr(err))
	}
	if err := l.wal.Committed(ctx, "commit"); err != nil {
		return fmt.Errorf("sqlitelog: %w", err)
	}
	return nil
}
