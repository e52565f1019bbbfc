package sqlite

import (
	"context"
	"fmt"
	"math/bits"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// GetMany implements store.Store: one statement, a seek of the primary key per key. The
// key list is padded (with its last key) to a power of two, so that a handful of statement
// shapes serve every length and each is prepared once.
func (s *Store) GetMany(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	if err := store.ValidateKeys(keys); err != nil {
		return nil, fmt.Errorf("sqlite: get many: %w", err)
	}
	out := make([]store.Item, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	n := 1 << bits.Len(uint(len(keys)-1)) // the least power of two >= len(keys)
	st, err := s.queryStmt(ctx, getManySQL(n))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get many: %w", mapErr(err))
	}
	args := make([]any, 0, 2*n+1)
	at := make(map[store.Key][]int, len(keys))
	for i := range n {
		k := keys[min(i, len(keys)-1)]
		args = append(args, k.PK, k.SK)
		if i < len(keys) {
			at[k] = append(at[k], i)
		}
	}
	args = append(args, s.now().Unix())
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get many: %w", mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: get many: %w", err)
		}
		for _, i := range at[it.Key] {
			out[i] = it
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: get many: %w", mapErr(err))
	}
	return out, nil
}

// getManySQL reads the live rows among n (pk, sk) pairs, bound as ?1..?2n, at the time ?2n+1.
// A row value IN a VALUES list is a primary-key seek per pair (TestQueryPlans checks).
func getManySQL(n int) string {
	var b strings.Builder
	b.WriteString(`SELECT ` + itemColumns + ` FROM items WHERE (pk, sk) IN (VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(?%d, ?%d)", 2*i+1, 2*i+2)
	}
	b.WriteString(`) AND ` + live("", 2*n+1))
	return b.String()
}
