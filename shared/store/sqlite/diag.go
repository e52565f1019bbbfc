package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// Mentioning returns every live item whose key, index keys or data contain one of needles,
// in key order; with no needle, every live item.
//
// It is a diagnostic, not a store operation: it reads the whole table, which no request or
// job may do (DynamoDB has no such read either). Tests use it to prove that an erasure is
// complete without trusting the erasing code's own idea of where its data lives: after a
// bot's purge, nothing may still name the bot. Data is searched as stored bytes, so a needle
// finds ids in JSON documents (a channel record names its bot only there).
func (s *Store) Mentioning(ctx context.Context, needles ...string) ([]store.Item, error) {
	rows, err := s.read.QueryContext(ctx,
		`SELECT `+itemColumns+` FROM items WHERE `+live("", 1)+` ORDER BY pk, sk`, s.now().Unix())
	if err != nil {
		return nil, fmt.Errorf("sqlite: mentioning: %w", mapErr(err))
	}
	defer rows.Close()
	var out []store.Item
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: mentioning: %w", mapErr(err))
		}
		if len(needles) == 0 || mentions(it, needles) {
			out = append(out, it)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: mentioning: %w", mapErr(err))
	}
	return out, nil
}

func mentions(it store.Item, needles []string) bool {
	for _, n := range needles {
		if n == "" {
			continue
		}
		for _, part := range []string{it.PK, it.SK, it.GSI1.PK, it.GSI1.SK, it.GSI2.PK, it.GSI2.SK} {
			if strings.Contains(part, n) {
				return true
			}
		}
		if bytes.Contains(it.Data, []byte(n)) {
			return true
		}
	}
	return false
}

// Unsynced reports how many commits made through s are not known to be on disk yet: those
// made under an open store.Deferral that nothing has flushed since (always 0 under Normal,
// which leaves syncs to SQLite). Tests use it to check that a piece of work syncs its
// deferred writes where it promises to.
func (s *Store) Unsynced() uint64 { return s.wal.Unsynced() }
