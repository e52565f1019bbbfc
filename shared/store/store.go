// Package store defines the single-table storage interface that every route family
// persists through. Implementations live in sub-packages (sqlite for the local process,
// dynamo for AWS) and must pass the conformance suite in storetest.
//
// The model is DynamoDB's: an item is addressed by a partition key (PK) and a sort key
// (SK); a query reads one partition in sort-key order; two optional secondary indexes
// (GSI1, GSI2) re-key items for other access paths. Optimistic concurrency is a
// condition on a single write or on each write of a transaction.
package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/jsonguard"
)

// Errors every implementation returns (possibly wrapped) so callers can branch with errors.Is.
var (
	// ErrNotFound means no live (unexpired) item has the key.
	ErrNotFound = errors.New("store: item not found")
	// ErrConditionFailed means a write's condition did not hold; nothing was written.
	ErrConditionFailed = errors.New("store: condition failed")
	// ErrInvalidCursor means a query cursor was not produced by this store for this query shape.
	ErrInvalidCursor = errors.New("store: invalid cursor")
	// ErrUnavailable means the backend refused work (throttling, lock timeout) after retries;
	// callers surface it as 503 so clients retry later.
	ErrUnavailable = errors.New("store: temporarily unavailable")
)

// ConditionError reports which write of a transaction failed its condition.
// For single writes Index is 0. It matches ErrConditionFailed under errors.Is.
type ConditionError struct {
	Index int
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("store: condition failed on write %d", e.Index)
}

// Is makes errors.Is(err, ErrConditionFailed) true.
func (e *ConditionError) Is(target error) bool { return target == ErrConditionFailed }

// Key addresses one item.
type Key struct {
	PK string
	SK string
}

// Valid reports whether both parts are set; the stores refuse empty keys.
func (k Key) Valid() bool { return k.PK != "" && k.SK != "" }

// DynamoDB's key size limits, in bytes of UTF-8. Every store enforces them so that a key
// that works in the local process also works in AWS.
const (
	MaxPKBytes = 2048
	MaxSKBytes = 1024
)

// Validate reports why every store refuses the key: a part that is empty, not UTF-8
// (DynamoDB's rule; cursors also carry keys as JSON strings, which cannot hold arbitrary
// bytes) or longer than DynamoDB allows.
func (k Key) Validate() error {
	if !k.Valid() {
		return errors.New("store: empty PK or SK")
	}
	return checkKeyParts("key", k.PK, k.SK)
}

func checkKeyParts(what, pk, sk string) error {
	switch {
	case !utf8.ValidString(pk) || !utf8.ValidString(sk):
		return fmt.Errorf("store: %s parts must be UTF-8", what)
	case len(pk) > MaxPKBytes:
		return fmt.Errorf("store: %s PK is %d bytes, more than %d", what, len(pk), MaxPKBytes)
	case len(sk) > MaxSKBytes:
		return fmt.Errorf("store: %s SK is %d bytes, more than %d", what, len(sk), MaxSKBytes)
	}
	return nil
}

// MaxDataBytes bounds an item's document. DynamoDB refuses an item over 400 KB, counting the
// names and values of all its attributes; the keys, index keys and bookkeeping attributes
// take at most about 9 KB of that, so every store refuses a larger document with
// ErrTooLarge: what works locally then also works on AWS.
const MaxDataBytes = 390 << 10

// ErrTooLarge means an item's document is over MaxDataBytes; nothing was written. Families
// bound what they store so that a request cannot get here, or answer it as the client's.
var ErrTooLarge = errors.New("store: item too large")

// Index names a secondary index. The primary key is the empty Index.
type Index string

// The indexes every store provides. Items without an index key are not in that index.
const (
	Primary Index = ""
	GSI1    Index = "gsi1"
	GSI2    Index = "gsi2"
)

// IndexKey is an item's key in a secondary index. The zero value means "not indexed".
// Unlike the primary key it need not be unique; ties are ordered by primary key.
type IndexKey struct {
	PK string
	SK string
}

// Item is one stored record.
type Item struct {
	Key
	GSI1 IndexKey
	GSI2 IndexKey
	// Revision is the caller's optimistic-concurrency counter; stores keep it as given
	// and compare it in RevisionIs conditions.
	Revision int64
	// Data is the item's JSON document, opaque to the store.
	Data []byte
	// Count is the atomic counter maintained by Add and AddOp.
	Count int64
	// ExpiresAt, when set, makes the item invisible to every read and condition from that
	// second on. Stores keep whole seconds (DynamoDB TTL's resolution).
	ExpiresAt time.Time
}

// Validate reports why every store refuses to write the item: an invalid key (see
// Key.Validate) or an invalid index key. An index key is all or nothing: the zero IndexKey
// means "not indexed", and DynamoDB refuses an empty string as an index key attribute, so
// a PK without an SK (or the reverse) has no meaning both stores share.
func (it Item) Validate() error {
	if err := it.Key.Validate(); err != nil {
		return err
	}
	if len(it.Data) > MaxDataBytes {
		return fmt.Errorf("%w: %d bytes of data, more than %d", ErrTooLarge, len(it.Data), MaxDataBytes)
	}
	for _, ik := range []struct {
		name string
		key  IndexKey
	}{{"GSI1", it.GSI1}, {"GSI2", it.GSI2}} {
		if (ik.key.PK == "") != (ik.key.SK == "") {
			return fmt.Errorf("store: %s key needs both PK and SK or neither", ik.name)
		}
		if err := checkKeyParts(ik.name, ik.key.PK, ik.key.SK); err != nil {
			return err
		}
	}
	return nil
}

// Expired reports whether the item is past its expiry at now.
func (it Item) Expired(now time.Time) bool {
	return !it.ExpiresAt.IsZero() && !now.Before(it.ExpiresAt)
}

// CondKind is the kind of a write condition.
type CondKind int

// The condition kinds. An expired item counts as absent for every kind.
const (
	CondNone CondKind = iota
	CondMustNotExist
	CondMustExist
	CondRevisionIs
)

// Condition guards a write: it happens only if the condition holds on the stored item.
type Condition struct {
	Kind     CondKind
	Revision int64 // for CondRevisionIs
}

// Conditions in the form callers write them.
var (
	Always       = Condition{Kind: CondNone}
	MustNotExist = Condition{Kind: CondMustNotExist}
	MustExist    = Condition{Kind: CondMustExist}
)

// RevisionIs holds when the item exists and its Revision equals rev.
func RevisionIs(rev int64) Condition { return Condition{Kind: CondRevisionIs, Revision: rev} }

// RevisionOrAbsent is the condition of writing over what was read at revision rev:
// RevisionIs(rev), or MustNotExist when rev is 0 (the item was read as absent).
func RevisionOrAbsent(rev int64) Condition {
	if rev <= 0 {
		return MustNotExist
	}
	return RevisionIs(rev)
}

// Holds evaluates the condition against the current item (nil when absent or expired).
// Implementations that evaluate conditions in Go share this definition.
func (c Condition) Holds(current *Item) bool {
	switch c.Kind {
	case CondMustNotExist:
		return current == nil
	case CondMustExist:
		return current != nil
	case CondRevisionIs:
		return current != nil && current.Revision == c.Revision
	case CondNone:
		return true
	default:
		return false // an unknown kind never lets a write through
	}
}

// Write is one operation of a transaction. Exactly one of Put, Delete, Add or Check is set;
// build it with PutOp, DeleteOp, AddOp or CheckOp.
type Write struct {
	Put    *Item
	Delete *Key
	Add    *Increment
	Check  *Key
	Cond   Condition
}

// Increment adds Delta to an item's Count, creating the item when absent.
type Increment struct {
	Key
	Delta int64
	// ExpiresAt, when set, replaces the item's expiry (counters that age out).
	ExpiresAt time.Time
}

// PutOp writes item when cond holds.
func PutOp(item Item, cond Condition) Write { return Write{Put: &item, Cond: cond} }

// DeleteOp deletes key when cond holds.
func DeleteOp(key Key, cond Condition) Write { return Write{Delete: &key, Cond: cond} }

// AddOp adds delta to the counter at key; it has no condition.
func AddOp(key Key, delta int64, expiresAt time.Time) Write {
	return Write{Add: &Increment{Key: key, Delta: delta, ExpiresAt: expiresAt}}
}

// CheckOp writes nothing but fails the transaction unless cond holds on key.
func CheckOp(key Key, cond Condition) Write { return Write{Check: &key, Cond: cond} }

// Target returns the key the write touches.
func (w Write) Target() (Key, error) {
	n := 0
	var k Key
	if w.Put != nil {
		n, k = n+1, w.Put.Key
	}
	if w.Delete != nil {
		n, k = n+1, *w.Delete
	}
	if w.Add != nil {
		n, k = n+1, w.Add.Key
	}
	if w.Check != nil {
		n, k = n+1, *w.Check
	}
	if n != 1 {
		return Key{}, errors.New("store: a write must set exactly one of Put, Delete, Add, Check")
	}
	if !k.Valid() {
		return Key{}, errors.New("store: empty PK or SK")
	}
	return k, nil
}

// MaxTransactWrites is the most writes one transaction may carry (DynamoDB's limit).
const MaxTransactWrites = 100

// ValidateTransaction checks the rules every store enforces on a transaction:
// 1..MaxTransactWrites writes, each well formed (valid keys and items, a known condition
// kind, none on an Add), no key touched twice.
func ValidateTransaction(writes []Write) error {
	if len(writes) == 0 || len(writes) > MaxTransactWrites {
		return fmt.Errorf("store: a transaction takes 1 to %d writes, got %d", MaxTransactWrites, len(writes))
	}
	seen := make(map[Key]struct{}, len(writes))
	for i, w := range writes {
		k, err := w.Target()
		if err == nil {
			err = k.Validate()
		}
		if err == nil && w.Put != nil {
			err = w.Put.Validate()
		}
		switch {
		case err != nil:
		case w.Cond.Kind < CondNone || w.Cond.Kind > CondRevisionIs:
			err = fmt.Errorf("store: unknown condition kind %d", w.Cond.Kind)
		case w.Add != nil && w.Cond.Kind != CondNone:
			// An increment creates what is absent and restarts what expired; a condition
			// on top would need a meaning per kind that no caller has asked for.
			err = errors.New("store: an Add takes no condition")
		}
		if err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		if _, dup := seen[k]; dup {
			return fmt.Errorf("store: write %d touches %s/%s twice in one transaction", i, k.PK, k.SK)
		}
		seen[k] = struct{}{}
	}
	return nil
}

// MaxQueryLimit bounds one query page.
const MaxQueryLimit = 1000

// Query reads one partition of the table or of a secondary index in sort-key order.
// At most one of Prefix and the From/To range may be given.
type Query struct {
	Index Index
	PK    string
	// Prefix keeps sort keys that begin with it.
	Prefix string
	// From and To bound sort keys inclusively; either may be empty for an open end.
	From, To string
	// Reverse reads from the highest sort key down.
	Reverse bool
	// Limit caps the page (1..MaxQueryLimit; 0 means MaxQueryLimit).
	Limit int
	// Cursor continues after the page that returned it as Next.
	Cursor string
}

// Validate reports a malformed query; stores call it first.
func (q Query) Validate() error {
	switch {
	case q.PK == "":
		return errors.New("store: query needs a partition key")
	case q.Index != Primary && q.Index != GSI1 && q.Index != GSI2:
		return fmt.Errorf("store: unknown index %q", q.Index)
	case q.Prefix != "" && (q.From != "" || q.To != ""):
		return errors.New("store: a query takes a prefix or a range, not both")
	case q.From != "" && q.To != "" && q.From > q.To:
		return errors.New("store: query range From is after To")
	case q.Limit < 0 || q.Limit > MaxQueryLimit:
		return fmt.Errorf("store: query limit must be 0..%d", MaxQueryLimit)
	}
	return nil
}

// Shape fingerprints everything a cursor's position is relative to, so that a store can
// refuse a cursor made for another partition, index, bound or direction instead of silently
// skipping or repeating items. Limit is left out: changing the page size between pages is
// legitimate. version separates the stores' cursor formats.
func (q Query) Shape(version string) string {
	h := sha256.New()
	dir := "f"
	if q.Reverse {
		dir = "r"
	}
	for _, part := range []string{version, string(q.Index), q.PK, q.Prefix, q.From, q.To, dir} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:9])
}

// EncodeCursor makes a store's opaque cursor: base64url of the JSON array [shape,
// position...], where shape is the query's Shape and position the raw keys of the page's
// last item in the query's order. Every store spells its cursors this way.
func EncodeCursor(shape string, pos []string) string {
	b, err := json.Marshal(append([]string{shape}, pos...))
	if err != nil { // strings always marshal
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Position is where a page ended, for its cursor: the last returned item's place in the
// query's full order (an index's sort key, then the item's key). It holds raw keys, never a
// store's combined encoding, so that the cursor format does not depend on the table layout.
func Position(idx Index, it Item) []string {
	switch idx {
	case GSI1:
		return []string{it.GSI1.SK, it.PK, it.SK}
	case GSI2:
		return []string{it.GSI2.SK, it.PK, it.SK}
	default:
		return []string{it.SK}
	}
}

// DecodeCursor opens a cursor EncodeCursor made: it must be for shape and hold a position of
// exactly n keys; anything else is ErrInvalidCursor. A store checks the keys themselves.
func DecodeCursor(cursor, shape string, n int) ([]string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrInvalidCursor)
	}
	if err := jsonguard.Check(raw); err != nil {
		return nil, fmt.Errorf("%w: malformed", ErrInvalidCursor)
	}
	var parts []string
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("%w: malformed", ErrInvalidCursor)
	}
	if n < 0 || len(parts) != n+1 || parts[0] != shape {
		return nil, fmt.Errorf("%w: made for another query", ErrInvalidCursor)
	}
	return parts[1:], nil
}

// PageLimit returns the effective limit.
func (q Query) PageLimit() int {
	if q.Limit == 0 {
		return MaxQueryLimit
	}
	return q.Limit
}

// Page is one page of query results.
type Page struct {
	Items []Item
	// Next is empty when no more items match; otherwise pass it as Query.Cursor.
	Next string
}

// Store is the single-table interface. Every method is safe for concurrent use.
type Store interface {
	// Get returns the live item at key or ErrNotFound.
	Get(ctx context.Context, key Key) (Item, error)
	// Put writes the whole item when cond holds, else returns a *ConditionError.
	Put(ctx context.Context, item Item, cond Condition) error
	// Delete removes the item when cond holds; deleting an absent item under Always succeeds.
	Delete(ctx context.Context, key Key, cond Condition) error
	// Add atomically adds delta to the item's Count (creating it) and returns the new Count.
	Add(ctx context.Context, key Key, delta int64, expiresAt time.Time) (int64, error)
	// GetMany returns the live items at keys in one round trip where the backend allows:
	// items[i] is keys[i]'s item, or the zero Item (its PK empty) when there is none. At most
	// MaxGetMany keys, each valid; a key may repeat.
	GetMany(ctx context.Context, keys []Key) ([]Item, error)
	// Query returns one page of live items.
	Query(ctx context.Context, q Query) (Page, error)
	// Transact applies every write or none: if any condition fails it returns a
	// *ConditionError naming the first failing write and nothing is written.
	Transact(ctx context.Context, writes []Write) error
	// Close releases the store's resources.
	Close() error
}

// MaxGetMany is the most keys one GetMany reads: DynamoDB's BatchGetItem limit.
const MaxGetMany = 100

// ValidateKeys checks a GetMany's keys: at most MaxGetMany, each valid.
func ValidateKeys(keys []Key) error {
	if len(keys) > MaxGetMany {
		return fmt.Errorf("store: %d keys in one read, more than %d", len(keys), MaxGetMany)
	}
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			return fmt.Errorf("store: key %d: %w", i, err)
		}
	}
	return nil
}

// Decode unmarshals an item's document into a T.
func Decode[T any](it Item) (T, error) {
	var v T
	if err := json.Unmarshal(it.Data, &v); err != nil {
		return v, fmt.Errorf("store: decode %s/%s: %w", it.PK, it.SK, err)
	}
	return v, nil
}

// Encode marshals v as an item document. HTML characters are kept as they are (not as
// \u003c): a stored email body is then as large as it was sent, not up to six times larger.
func Encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("store: encode: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// SecondsPrecision truncates an expiry to the whole second stores keep.
func SecondsPrecision(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(t.Unix(), 0).UTC()
}
