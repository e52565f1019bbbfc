package dynamo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// The combined index sort key.
//
// DynamoDB orders items with equal index sort keys in no documented order, and a cursor
// taken from a page boundary inside such a tie could not say where the next page starts.
// The store's contract orders ties by primary key, so each index sort key attribute holds
// the tuple (index SK, PK, SK) encoded as one string whose byte order (DynamoDB's order for
// strings) is the tuple's order:
//
//	escape(indexSK) + "\x00\x01" + escape(PK) + "\x00\x01" + escape(SK)
//
// escape turns each NUL byte into "\x00\x02". The terminator "\x00\x01" sorts below every
// byte a component can continue with (any non-NUL byte, or an escaped NUL), so a component
// that is a prefix of another sorts first, as it does in the tuple order; and no component
// can contain the terminator, so decoding is unambiguous. Both sequences are valid UTF-8,
// which DynamoDB requires of strings. A prefix or range on the index SK maps onto the
// combined key too (see indexBounds), and LastEvaluatedKey is a plain (PK, SK, index key)
// position again.
const (
	terminator = "\x00\x01"
	escapedNUL = "\x00\x02"
	// maxIndexSortKey is DynamoDB's limit for an index sort key attribute, which the
	// combined key must meet.
	maxIndexSortKey = 1024
)

func escape(s string) string { return strings.ReplaceAll(s, "\x00", escapedNUL) }

// combine encodes an item's position in an index.
func combine(indexSK, pk, sk string) string {
	var b strings.Builder
	b.Grow(len(indexSK) + len(pk) + len(sk) + 2*len(terminator))
	b.WriteString(escape(indexSK))
	b.WriteString(terminator)
	b.WriteString(escape(pk))
	b.WriteString(terminator)
	b.WriteString(escape(sk))
	return b.String()
}

// split decodes a combined key into its three components.
func split(combined string) (indexSK, pk, sk string, err error) {
	parts := make([]string, 0, 3)
	var cur strings.Builder
	for i := 0; i < len(combined); i++ {
		c := combined[i]
		if c != 0 {
			cur.WriteByte(c)
			continue
		}
		if i+1 == len(combined) {
			return "", "", "", errors.New("combined index key ends inside an escape")
		}
		i++
		switch combined[i] {
		case terminator[1]:
			parts = append(parts, cur.String())
			cur.Reset()
		case escapedNUL[1]:
			cur.WriteByte(0)
		default:
			return "", "", "", fmt.Errorf("combined index key has a bad escape at byte %d", i-1)
		}
	}
	parts = append(parts, cur.String())
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("combined index key has %d parts, want 3", len(parts))
	}
	return parts[0], parts[1], parts[2], nil
}

// keyBounds is a query's sort-key condition in the form DynamoDB takes it.
type keyBounds struct {
	prefix string // begins_with, when set
	lo, hi string // inclusive bounds, each when set
	hasLo  bool
	hasHi  bool
}

// bounds translates the query's prefix or range onto the sort key attribute it reads: the
// raw SK for the table, the combined key for an index.
func bounds(q store.Query) keyBounds {
	if q.Index == store.Primary {
		return keyBounds{prefix: q.Prefix, lo: q.From, hi: q.To, hasLo: q.From != "", hasHi: q.To != ""}
	}
	var b keyBounds
	b.prefix = escape(q.Prefix) // a combined key starts with escape(prefix) exactly when its index SK starts with prefix
	if q.From != "" {
		// Every item whose index SK is From or above combines to a key at or above escape(From).
		b.lo, b.hasLo = escape(q.From), true
	}
	if q.To != "" {
		// Items whose index SK is To combine to escape(To)+terminator+...; the next escape
		// sequence is the least continuation above all of them, and every longer index SK
		// starts with a byte or escape above the terminator.
		b.hi, b.hasHi = escape(q.To)+escapedNUL, true
	}
	return b
}

// inRange reports whether an index (or table) sort key lies inside the query's prefix or
// range. A cursor outside it was not made by this query, and DynamoDB would refuse it as a
// start key outside the query's boundaries.
func inRange(q store.Query, sk string) bool {
	switch {
	case q.Prefix != "":
		return strings.HasPrefix(sk, q.Prefix)
	case q.From != "" && sk < q.From:
		return false
	case q.To != "" && sk > q.To:
		return false
	}
	return true
}

// queryShape is the query's cursor fingerprint in this store's cursor format.
func queryShape(q store.Query) string { return q.Shape("dynamo/v1") }

// decodeCursor checks that the cursor was made for q and returns its position.
func decodeCursor(q store.Query) ([]string, error) {
	n := 1
	if q.Index != store.Primary {
		n = 3
	}
	pos, err := store.DecodeCursor(q.Cursor, queryShape(q), n)
	if err != nil {
		return nil, err
	}
	for _, p := range pos {
		if p == "" {
			return nil, fmt.Errorf("%w: empty key", store.ErrInvalidCursor)
		}
	}
	if !inRange(q, pos[0]) {
		return nil, fmt.Errorf("%w: outside the query's range", store.ErrInvalidCursor)
	}
	return pos, nil
}
