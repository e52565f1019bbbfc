package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/botplatform/api/shared/store"
)

// pointSQL reads the live value of one key, bound as ?1 and ?2, at the time ?3. It selects
// the value only: the key is the caller's.
var pointSQL = `SELECT revision, data, count, expires, gsi1pk, gsi1sk, gsi2pk, gsi2sk FROM items WHERE pk = ?1 AND sk = ?2 AND ` + live("", 3)

// points runs Store.Get, the read under every request (the kernel's tenancy check), on
// read-only connections of its own, each holding its statement prepared on the driver's
// connection (database/sql's Conn.Raw). database/sql's own path for one row (a pooled
// statement, Rows, Scan's conversions and copies) made Get 1.3 to 1.4 times a bare
// one-column query in BenchmarkGet; the driver's statement, the same SQLite statement
// without that path, brings it to about 1.0, and an authenticated GET's CPU down by a tenth.
type points struct {
	db   *sql.DB
	idle chan *point   // connections not in use
	open chan struct{} // a token per connection open: at most cap(open)

	closed atomic.Bool
}

// point is one connection and its statement.
type point struct {
	conn *sql.Conn
	stmt driver.Stmt
}

// newPoints returns a points of at most n connections of db, opened as needed.
func newPoints(db *sql.DB, n int) *points {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return &points{db: db, idle: make(chan *point, n), open: make(chan struct{}, n)}
}

// errPointsClosed answers a read after close.
var errPointsClosed = errors.New("sqlite: closed")

// get runs the statement with args and hands its row to scan; found is false when there is
// none.
func (p *points) get(ctx context.Context, args []driver.NamedValue, scan func(row []driver.Value) error) (found bool, err error) {
	pt, err := p.take(ctx)
	if err != nil {
		return false, err
	}
	err = pt.conn.Raw(func(any) error {
		rows, err := pt.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
		if err != nil {
			return err
		}
		row := make([]driver.Value, len(rows.Columns()))
		err = rows.Next(row)
		if cerr := rows.Close(); err == nil && cerr != nil {
			return cerr
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return scan(row)
	})
	p.give(pt, errors.Is(err, driver.ErrBadConn))
	return found, err
}

// take returns an idle connection, or opens one while fewer than the most are open, or
// waits for one to come back.
func (p *points) take(ctx context.Context) (*point, error) {
	if p.closed.Load() {
		return nil, errPointsClosed
	}
	select {
	case pt := <-p.idle:
		return pt, nil
	default:
	}
	select {
	case pt := <-p.idle:
		return pt, nil
	case p.open <- struct{}{}:
		pt, err := p.dial(ctx)
		if err != nil {
			<-p.open
			return nil, err
		}
		return pt, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dial opens a connection and prepares the statement on it.
func (p *points) dial(ctx context.Context) (*point, error) {
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	pt := &point{conn: conn}
	err = conn.Raw(func(dc any) error {
		prep, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("sqlite: the driver's connection %T cannot prepare", dc)
		}
		st, err := prep.PrepareContext(ctx, pointSQL)
		if err != nil {
			return err
		}
		if _, ok := st.(driver.StmtQueryContext); !ok {
			st.Close()
			return fmt.Errorf("sqlite: the driver's statement %T cannot query", st)
		}
		pt.stmt = st
		return nil
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return pt, nil
}

// give puts pt back, or closes it when its connection went bad.
func (p *points) give(pt *point, bad bool) {
	if bad {
		pt.close()
		<-p.open
		return
	}
	p.idle <- pt
}

func (pt *point) close() {
	_ = pt.conn.Raw(func(any) error { return pt.stmt.Close() })
	_ = pt.conn.Close()
}

// close closes every connection once the reads under way are done; reads after it fail.
func (p *points) close() error {
	p.closed.Store(true)
	for len(p.open) > 0 {
		select {
		case pt := <-p.idle:
			pt.close()
			<-p.open
		case <-time.After(10 * time.Millisecond): // a dial refused since gives its token back
		}
	}
	return p.db.Close()
}

// scanPoint reads pointSQL's row into it.
func scanPoint(row []driver.Value, it *store.Item) error {
	var expires int64
	var g [4]string
	ints := []*int64{&it.Revision, &it.Count, &expires}
	for i, col := range []int{0, 2, 3} {
		v, ok := row[col].(int64)
		if !ok {
			return fmt.Errorf("sqlite: get: column %d is %T, not an integer", col, row[col])
		}
		*ints[i] = v
	}
	switch v := row[1].(type) {
	case nil:
	case []byte:
		it.Data = bytes.Clone(v) // the driver's Rows may reuse it, as database/sql assumes
	default:
		return fmt.Errorf("sqlite: get: data is %T, not a blob", v)
	}
	for i := range g {
		switch v := row[4+i].(type) {
		case nil:
		case string:
			g[i] = v
		default:
			return fmt.Errorf("sqlite: get: index key column is %T, not text", v)
		}
	}
	setColumns(it, expires, g)
	return nil
}
