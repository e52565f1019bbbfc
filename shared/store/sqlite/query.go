package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// indexColumns names an index's partition column, its sort column, and the columns that
// order it completely (the cursor position).
func indexColumns(idx store.Index) (pk, sk string, order []string) {
	switch idx {
	case store.GSI1:
		return "gsi1pk", "gsi1sk", []string{"gsi1sk", "pk", "sk"}
	case store.GSI2:
		return "gsi2pk", "gsi2sk", []string{"gsi2sk", "pk", "sk"}
	default:
		return "pk", "sk", []string{"sk"}
	}
}

// Query implements store.Store. It reads one more row than the page holds, so that Next is
// empty exactly when nothing follows.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := q.Validate(); err != nil {
		return store.Page{}, err
	}
	pkCol, skCol, order := indexColumns(q.Index)
	shape := queryShape(q)
	var after []string
	if q.Cursor != "" {
		var err error
		if after, err = store.DecodeCursor(q.Cursor, shape, len(order)); err != nil {
			return store.Page{}, err
		}
	}
	limit := q.PageLimit()

	var b strings.Builder
	args := []any{q.PK, s.now().Unix()}
	fmt.Fprintf(&b, `SELECT %s FROM items WHERE %s = ?1 AND %s`, itemColumns, pkCol, live("", 2))
	// Ranges, never LIKE: a LIKE prefix cannot use the index for arbitrary bytes and treats
	// '%' and '_' specially.
	var lo, hi *bound
	if q.Prefix != "" {
		lo = &bound{q.Prefix, true}
		if succ, ok := successor(q.Prefix); ok {
			hi = &bound{succ, false}
		}
	}
	if q.From != "" {
		lo = &bound{q.From, true}
	}
	if q.To != "" {
		hi = &bound{q.To, true}
	}
	param := func(v string) string {
		args = append(args, v)
		return fmt.Sprintf("?%d", len(args))
	}
	if after != nil {
		// The cursor replaces the bound on its side: SQLite seeks an index on one lower
		// and one upper bound, and with both a range bound and the cursor it may seek on
		// the range and filter its way to the cursor, making every page of a deep walk
		// slower than the last. A cursor outside the range (only a forged one can be)
		// excludes nothing, and is dropped instead.
		c := after[0]
		var cmp string
		switch {
		case !q.Reverse && (lo == nil || c >= lo.v):
			cmp, lo = ">", nil
		case q.Reverse && (hi == nil || c < hi.v || hi.inclusive && c == hi.v):
			cmp, hi = "<", nil
		}
		if cmp != "" {
			// A row value compares lexicographically, which is the index order, and
			// SQLite turns it into a range seek on the index.
			params := make([]string, len(after))
			for i, v := range after {
				params[i] = param(v)
			}
			fmt.Fprintf(&b, ` AND (%s) %s (%s)`, strings.Join(order, ", "), cmp, strings.Join(params, ", "))
		}
	}
	if lo != nil {
		fmt.Fprintf(&b, ` AND %s >= %s`, skCol, param(lo.v)) // lower bounds are all inclusive
	}
	if hi != nil {
		op := "<"
		if hi.inclusive {
			op = "<="
		}
		fmt.Fprintf(&b, ` AND %s %s %s`, skCol, op, param(hi.v))
	}
	dir := " ASC"
	if q.Reverse {
		dir = " DESC"
	}
	b.WriteString(` ORDER BY `)
	for i, c := range order {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c + dir)
	}
	// The LIMIT is a literal, never a parameter: SQLite reads a bound LIMIT's value while
	// planning and marks the statement stale whenever it is bound again, so every run of
	// the cached statement would be parsed and planned anew (a third of a small query's
	// cost). Rounding it up to a power of two keeps the cached texts few; the loop below
	// stops at limit+1 rows all the same.
	fmt.Fprintf(&b, ` LIMIT %d`, limitBucket(limit+1))

	st, err := s.queryStmt(ctx, b.String())
	if err != nil {
		return store.Page{}, fmt.Errorf("sqlite: query: %w", mapErr(err))
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("sqlite: query: %w", mapErr(err))
	}
	defer rows.Close()
	items := make([]store.Item, 0, min(limit+1, 64))
	for len(items) <= limit && rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return store.Page{}, fmt.Errorf("sqlite: query: %w", mapErr(err))
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("sqlite: query: %w", mapErr(err))
	}
	page := store.Page{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.Next = store.EncodeCursor(shape, store.Position(q.Index, items[limit-1]))
	}
	return page, nil
}

// limitBucket is the least power of two at least n, the LIMIT a query of n rows runs with.
func limitBucket(n int) int {
	b := 1
	for b < n {
		b <<= 1
	}
	return b
}

// queryStmt returns a prepared statement of the read pool for a query's SQL text.
func (s *Store) queryStmt(ctx context.Context, text string) (*sql.Stmt, error) {
	return s.cachedStmt(ctx, s.read, text)
}

// cachedStmt returns a prepared statement of db (the store's read or write pool) for text,
// preparing it once. The shapes are few (queries: index x bounds x direction x cursor;
// batched reads and increments: one per size), so the cache stays small; a text belongs to
// one pool (reads are SELECTs, writes are not). The lock is not held while preparing: a
// statement of the write pool waits for its one connection, which a batch may hold.
func (s *Store) cachedStmt(ctx context.Context, db *sql.DB, text string) (*sql.Stmt, error) {
	s.mu.Lock()
	st, ok := s.queries[text]
	s.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, ok := s.queries[text]; ok { // prepared meanwhile by another caller
		st.Close()
		return first, nil
	}
	s.queries[text] = st
	return st, nil
}

// bound is one end of a sort-key range.
type bound struct {
	v         string
	inclusive bool
}

// successor returns the least string greater than every string with the given prefix, so
// that a prefix becomes the range [prefix, successor). ok is false when no such string
// exists (the prefix is all 0xFF bytes), and the range is then open above.
func successor(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// queryShape is the query's cursor fingerprint in this store's cursor format.
func queryShape(q store.Query) string { return q.Shape("v1") }
