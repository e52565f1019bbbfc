// Package dynamo implements store.Store on one DynamoDB table, for the AWS shape of the
// platform. It passes the same conformance suite (storetest) as the SQLite store, run
// against AWS's DynamoDB Local by tests/emulators/dynamodb-test.sh.
//
// # Table
//
// TableSchema and the Attr* constants describe the table: string keys PK and SK, two
// global secondary indexes GSI1 (GSI1PK, GSI1SK) and GSI2 (GSI2PK, GSI2SK) projecting all
// attributes, and the attributes rev (number), data (binary), count (number) and expires
// (number, Unix seconds, the table's TTL attribute). An item without an index key has no
// index attributes, so the indexes are sparse. The index sort key attributes hold a
// combined key (index SK, PK, SK) so that ties on the index SK come back in primary-key
// order, which DynamoDB does not otherwise guarantee; reads decode it (see keys.go).
//
// # Expiry
//
// DynamoDB's TTL sweeper deletes expired items up to days late, so every read filters
// them out (Get in Go, Query with a FilterExpression) and every condition treats them as
// absent: "must exist" is attribute_exists(PK) AND (attribute_not_exists(expires) OR
// expires > :now), and "must not exist" is attribute_not_exists(PK) OR expires <= :now.
// "Now" is the Store's clock, so tests can move it.
//
// # Add on an expired item
//
// Add must restart an expired item from nothing: count = delta, no document, no index
// keys, no revision. One UpdateExpression cannot do that, since it cannot choose between
// ADD and a whole replacement depending on the stored expiry. So an Add is first sent as
// UpdateItem "ADD count :d" under the condition "absent or live", asking for the old item
// when the condition fails (ReturnValuesOnConditionCheckFailure ALL_OLD). If the old item
// was expired, the Add becomes a PutItem of the fresh item under the condition "exists
// and expired"; if that fails too, another writer got there first and the Add starts
// over. Each attempt is one atomic conditional write, so concurrent Adds never lose an
// increment.
//
// Inside a transaction the same choice is made per AddOp, and the whole transaction is
// sent again with the other form when DynamoDB cancels it because an AddOp's assumption
// was wrong (the cancellation reasons carry the old items). Every attempt is a whole
// TransactWriteItems call, so the transaction stays all-or-nothing.
//
// The "absent or live" condition also refuses an increment past the int64 range, which
// DynamoDB's 38-digit numbers would otherwise accept and no reader could decode.
//
// # Consistency
//
// Get and table queries read strongly consistently, as the SQLite store does. Index
// queries cannot (DynamoDB's global secondary indexes are eventually consistent), so in
// AWS an index query may briefly miss a write that has returned; DynamoDB Local does not
// show this.
//
// # Throttling
//
// The Store clones the client it is given with its own retryer (see RetryPolicy); when
// retries run out the error wraps store.ErrUnavailable.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botplatform/api/shared/store"
)

// Store is a store.Store on one DynamoDB table. It is safe for concurrent use.
type Store struct {
	db    *dynamodb.Client
	table string
	now   func() time.Time
	retry RetryPolicy
}

var _ store.Store = (*Store)(nil)

// Option configures New.
type Option func(*options)

type options struct {
	now   func() time.Time
	retry RetryPolicy
}

// WithClock sets the clock that decides expiry; tests pass a fake one. The default is
// time.Now. A nil clock is ignored.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithRetry sets the retry policy for throttling and transaction conflicts. Zero fields
// take DefaultRetryPolicy's values.
func WithRetry(p RetryPolicy) Option {
	return func(o *options) { o.retry = p }
}

// New returns a Store on the table, which must exist with TableSchema's keys and indexes
// (CreateTable makes one). The client is not modified: the Store makes its own copy with
// the retry policy installed, keeping the client's endpoint, credentials, HTTP client and
// middleware. New panics on a nil client or an empty table name, which are wiring
// mistakes that no request could recover from.
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	if client == nil || table == "" {
		panic("dynamo: New needs a client and a table name")
	}
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	policy := o.retry.withDefaults()
	db := dynamodb.New(client.Options(), func(co *dynamodb.Options) {
		co.Retryer = policy.retryer()
		// Otherwise the client's own RetryMaxAttempts would wrap our retryer again.
		co.RetryMaxAttempts = 0
	})
	return &Store{db: db, table: table, now: o.now, retry: policy}
}

// Close implements store.Store. The Store holds no resources of its own: the HTTP
// connections belong to the client, which callers share and keep.
func (s *Store) Close() error { return nil }

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key store.Key) (store.Item, error) {
	if err := key.Validate(); err != nil {
		return store.Item{}, fmt.Errorf("dynamo: get: %w", err)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyAttrs(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return store.Item{}, wrapErr(ctx, "get", err)
	}
	if out.Item == nil {
		return store.Item{}, store.ErrNotFound
	}
	it, err := decodeItem(out.Item)
	if err != nil {
		return store.Item{}, fmt.Errorf("dynamo: get: %w", err)
	}
	if it.Expired(s.now()) {
		return store.Item{}, store.ErrNotFound
	}
	return it, nil
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, item store.Item, cond store.Condition) error {
	av, err := encodeItem(item)
	if err != nil {
		return fmt.Errorf("dynamo: put: %w", err)
	}
	ex, err := condition(cond, s.now().Unix())
	if err != nil {
		return fmt.Errorf("dynamo: put: %w", err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      av,
		ConditionExpression:       ex.cond(),
		ExpressionAttributeNames:  ex.names(),
		ExpressionAttributeValues: ex.vals(),
	})
	return conditionalErr(ctx, "put", err)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key store.Key, cond store.Condition) error {
	if err := key.Validate(); err != nil {
		return fmt.Errorf("dynamo: delete: %w", err)
	}
	ex, err := condition(cond, s.now().Unix())
	if err != nil {
		return fmt.Errorf("dynamo: delete: %w", err)
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyAttrs(key),
		ConditionExpression:       ex.cond(),
		ExpressionAttributeNames:  ex.names(),
		ExpressionAttributeValues: ex.vals(),
	})
	return conditionalErr(ctx, "delete", err)
}

// conditionalErr maps the outcome of a single conditional write.
func conditionalErr(ctx context.Context, op string, err error) error {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return &store.ConditionError{Index: 0}
	default:
		return wrapErr(ctx, op, err)
	}
}

// maxAddRounds bounds how often one Add (or a transaction's AddOps) may switch between
// incrementing and replacing because another writer changed the item in between. Each
// switch needs such a writer, so the bound is only reached under pathological contention.
const maxAddRounds = 16

// errOverflow reports an Add that would leave the int64 range.
var errOverflow = errors.New("counter would overflow int64")

// Add implements store.Store; see the package doc for how it restarts expired items.
func (s *Store) Add(ctx context.Context, key store.Key, delta int64, expiresAt time.Time) (int64, error) {
	if err := key.Validate(); err != nil {
		return 0, fmt.Errorf("dynamo: add: %w", err)
	}
	for range maxAddRounds {
		now := s.now().Unix()
		inc := increment(delta, expiresAt, now)
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.table),
			Key:                                 keyAttrs(key),
			UpdateExpression:                    aws.String(inc.update),
			ConditionExpression:                 inc.cond(),
			ExpressionAttributeNames:            inc.names(),
			ExpressionAttributeValues:           inc.vals(),
			ReturnValues:                        types.ReturnValueUpdatedNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			n, err := intAttr(out.Attributes, AttrCount)
			if err != nil {
				return 0, fmt.Errorf("dynamo: add: %w", err)
			}
			return n, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return 0, wrapErr(ctx, "add", err)
		}
		old, err := s.oldItem(ctx, key, ccf.Item)
		if err != nil {
			return 0, fmt.Errorf("dynamo: add: %w", err)
		}
		if old != nil && !old.Expired(time.Unix(now, 0)) {
			return 0, fmt.Errorf("dynamo: add: %w", errOverflow)
		}
		if old == nil {
			continue // deleted since: the next increment creates it
		}
		fresh := restart(key, delta, expiresAt, now)
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 aws.String(s.table),
			Item:                      fresh.item,
			ConditionExpression:       fresh.cond(),
			ExpressionAttributeNames:  fresh.names(),
			ExpressionAttributeValues: fresh.vals(),
		})
		var again *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return delta, nil
		case !errors.As(err, &again):
			return 0, wrapErr(ctx, "add", err)
		}
		// Someone revived or deleted the item in between: increment whatever is there now.
	}
	return 0, fmt.Errorf("dynamo: add: %w: the item kept changing under %d attempts", store.ErrUnavailable, maxAddRounds)
}

// oldItem decodes the item a failed condition returned. DynamoDB returns it when asked;
// should an emulator or proxy leave it out, a consistent read stands in.
func (s *Store) oldItem(ctx context.Context, key store.Key, av map[string]types.AttributeValue) (*store.Item, error) {
	if av == nil {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(s.table), Key: keyAttrs(key), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, wrapErr(ctx, "read after failed condition", err)
		}
		if out.Item == nil {
			return nil, nil
		}
		av = out.Item
	}
	it, err := decodeItem(av)
	if err != nil {
		return nil, err
	}
	return &it, nil
}

// addWrite is an Add in one of its two forms.
type addWrite struct {
	expr
	update string                          // the increment's UpdateExpression
	item   map[string]types.AttributeValue // the replacement of an expired item
}

// increment is the Add as an UpdateItem on an absent or live item.
func increment(delta int64, expiresAt time.Time, now int64) addWrite {
	w := addWrite{update: "ADD #cnt :delta"}
	w.val(":delta", num(delta))
	w.val(":now", num(now))
	// Absent items have no expires, so the first half also covers "absent".
	c := "(attribute_not_exists(#exp) OR #exp > :now)"
	switch {
	case delta > 0:
		c += " AND (attribute_not_exists(#cnt) OR #cnt <= :limit)"
		w.val(":limit", num(math.MaxInt64-delta))
	case delta < 0:
		c += " AND (attribute_not_exists(#cnt) OR #cnt >= :limit)"
		w.val(":limit", num(math.MinInt64-delta))
	}
	w.condition = c
	if !expiresAt.IsZero() {
		w.update = "SET #exp = :exp " + w.update
		w.val(":exp", num(expiresAt.Unix()))
	}
	w.expressions = []string{w.update, w.condition}
	return w
}

// restart is the Add as a PutItem of a fresh item over an expired one.
func restart(key store.Key, delta int64, expiresAt time.Time, now int64) addWrite {
	w := addWrite{item: keyAttrs(key)}
	w.item[AttrCount] = num(delta)
	if !expiresAt.IsZero() {
		w.item[AttrExpires] = num(expiresAt.Unix())
	}
	w.condition = "attribute_exists(#pk) AND #exp <= :now"
	w.val(":now", num(now))
	w.expressions = []string{w.condition}
	return w
}

// expr collects one request's condition and the placeholders its expressions use.
// DynamoDB refuses a request that defines a placeholder none of its expressions uses, so
// names are derived from the expression text rather than declared up front.
type expr struct {
	condition   string
	expressions []string // every expression of the request, for names()
	values      map[string]types.AttributeValue
}

func (e *expr) val(name string, v types.AttributeValue) {
	if e.values == nil {
		e.values = make(map[string]types.AttributeValue)
	}
	e.values[name] = v
}

func (e *expr) cond() *string {
	if e.condition == "" {
		return nil
	}
	return aws.String(e.condition)
}

func (e *expr) vals() map[string]types.AttributeValue { return e.values }

func (e *expr) names() map[string]string {
	var out map[string]string
	for _, x := range append([]string{e.condition}, e.expressions...) {
		for _, p := range placeholders(x) {
			if out == nil {
				out = make(map[string]string)
			}
			out[p] = attrFor(p)
		}
	}
	return out
}

// placeholders returns the #name tokens of an expression.
func placeholders(x string) []string {
	var out []string
	for i := 0; i < len(x); i++ {
		if x[i] != '#' {
			continue
		}
		j := i + 1
		for j < len(x) && (x[j] >= 'a' && x[j] <= 'z' || x[j] >= '0' && x[j] <= '9') {
			j++
		}
		out = append(out, x[i:j])
		i = j - 1
	}
	return out
}

// attrFor maps an expression placeholder to its attribute. Every attribute goes through a
// placeholder, because several of ours (count, data) are DynamoDB reserved words.
func attrFor(placeholder string) string {
	switch placeholder {
	case "#pk":
		return AttrPK
	case "#sk":
		return AttrSK
	case "#exp":
		return AttrExpires
	case "#rev":
		return AttrRevision
	case "#cnt":
		return AttrCount
	case "#g1pk":
		return AttrGSI1PK
	case "#g1sk":
		return AttrGSI1SK
	case "#g2pk":
		return AttrGSI2PK
	case "#g2sk":
		return AttrGSI2SK
	}
	panic("dynamo: unknown placeholder " + placeholder) // only our own constant expressions get here
}

// condition translates a store.Condition. An expired item counts as absent for every kind.
func condition(c store.Condition, now int64) (expr, error) {
	var e expr
	const live = "(attribute_exists(#pk) AND (attribute_not_exists(#exp) OR #exp > :now))"
	switch c.Kind {
	case store.CondNone:
		return e, nil
	case store.CondMustNotExist:
		e.condition = "attribute_not_exists(#pk) OR #exp <= :now"
	case store.CondMustExist:
		e.condition = live
	case store.CondRevisionIs:
		e.condition = live + " AND #rev = :rev"
		if c.Revision == 0 {
			// Items that Add created carry no revision, which reads as 0.
			e.condition = live + " AND (#rev = :rev OR attribute_not_exists(#rev))"
		}
		e.val(":rev", num(c.Revision))
	default:
		return e, fmt.Errorf("unknown condition kind %d", c.Kind)
	}
	e.val(":now", num(now))
	return e, nil
}

// checkCondition is a transaction's ConditionCheck expression: the condition, or one that
// always holds for CheckOp(key, Always), since DynamoDB requires an expression there.
func checkCondition(c store.Condition, now int64) (expr, error) {
	e, err := condition(c, now)
	if err == nil && e.condition == "" {
		e.condition = "attribute_exists(#pk) OR attribute_not_exists(#pk)"
	}
	return e, err
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func keyAttrs(k store.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: str(k.PK), AttrSK: str(k.SK)}
}

// encodeItem validates the item and lays it out as table attributes. Zero-valued optional
// fields are left out (no index key, no document, no expiry), so that the indexes stay
// sparse and DynamoDB never sees an empty key attribute.
func encodeItem(it store.Item) (map[string]types.AttributeValue, error) {
	if err := it.Validate(); err != nil {
		return nil, err
	}
	av := keyAttrs(it.Key)
	av[AttrRevision] = num(it.Revision)
	av[AttrCount] = num(it.Count)
	if len(it.Data) > 0 {
		av[AttrData] = &types.AttributeValueMemberB{Value: it.Data}
	}
	if !it.ExpiresAt.IsZero() {
		av[AttrExpires] = num(it.ExpiresAt.Unix())
	}
	for _, ix := range []struct {
		key    store.IndexKey
		pk, sk string
		name   string
	}{{it.GSI1, AttrGSI1PK, AttrGSI1SK, "GSI1"}, {it.GSI2, AttrGSI2PK, AttrGSI2SK, "GSI2"}} {
		if ix.key.PK == "" {
			continue
		}
		combined := combine(ix.key.SK, it.PK, it.SK)
		if len(combined) > maxIndexSortKey {
			return nil, fmt.Errorf("%s SK, PK and SK together take %d bytes in the index sort key, more than DynamoDB's %d",
				ix.name, len(combined), maxIndexSortKey)
		}
		av[ix.pk] = str(ix.key.PK)
		av[ix.sk] = str(combined)
	}
	return av, nil
}

// decodeItem reads an item back. A missing number reads as 0, as Add creates items
// without a revision; an attribute of the wrong type means something else wrote the
// table, and is an error rather than a silent zero.
func decodeItem(av map[string]types.AttributeValue) (store.Item, error) {
	var it store.Item
	var err error
	if it.PK, err = strAttr(av, AttrPK); err != nil {
		return it, err
	}
	if it.SK, err = strAttr(av, AttrSK); err != nil {
		return it, err
	}
	if it.Revision, err = intAttr(av, AttrRevision); err != nil {
		return it, err
	}
	if it.Count, err = intAttr(av, AttrCount); err != nil {
		return it, err
	}
	if v, ok := av[AttrData]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			return it, fmt.Errorf("%s/%s: attribute %s is not binary", it.PK, it.SK, AttrData)
		}
		it.Data = b.Value
	}
	if _, ok := av[AttrExpires]; ok {
		exp, err := intAttr(av, AttrExpires)
		if err != nil {
			return it, err
		}
		it.ExpiresAt = time.Unix(exp, 0).UTC()
	}
	for _, ix := range []struct {
		dst    *store.IndexKey
		pk, sk string
	}{{&it.GSI1, AttrGSI1PK, AttrGSI1SK}, {&it.GSI2, AttrGSI2PK, AttrGSI2SK}} {
		if _, ok := av[ix.pk]; !ok {
			continue
		}
		if ix.dst.PK, err = strAttr(av, ix.pk); err != nil {
			return it, err
		}
		combined, err := strAttr(av, ix.sk)
		if err != nil {
			return it, err
		}
		if ix.dst.SK, _, _, err = split(combined); err != nil {
			return it, fmt.Errorf("%s/%s: attribute %s: %w", it.PK, it.SK, ix.sk, err)
		}
	}
	return it, nil
}

func strAttr(av map[string]types.AttributeValue, name string) (string, error) {
	v, ok := av[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s is missing or not a string", name)
	}
	return v.Value, nil
}

func intAttr(av map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := av[name]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is not a number", name)
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return i, nil
}
