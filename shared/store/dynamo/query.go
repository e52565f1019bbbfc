package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botplatform/api/shared/store"
)

// indexAttrs names an index's DynamoDB index name and the placeholders of its key
// attributes.
func indexAttrs(idx store.Index) (name *string, pk, sk string) {
	switch idx {
	case store.GSI1:
		return aws.String(IndexGSI1), "#g1pk", "#g1sk"
	case store.GSI2:
		return aws.String(IndexGSI2), "#g2pk", "#g2sk"
	default:
		return nil, "#pk", "#sk"
	}
}

// Query implements store.Store.
//
// DynamoDB applies Limit before the FilterExpression that drops expired items, so one
// request may return fewer live items than asked for while more follow. Query therefore
// keeps reading until it holds one item more than the page (then Next is the position of
// the page's last item) or the partition is exhausted (then Next is empty): Next is empty
// exactly when nothing more matches. The first request evaluates limit+1 items, which is
// exact when nothing has expired; while expired items get in the way, each further request
// evaluates twice as many as the one before, so a run of expired items costs a few round
// trips rather than one per item.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := q.Validate(); err != nil {
		return store.Page{}, fmt.Errorf("dynamo: query: %w", err)
	}
	var start map[string]types.AttributeValue
	if q.Cursor != "" {
		pos, err := decodeCursor(q)
		if err != nil {
			return store.Page{}, err
		}
		if start, err = startKey(q, pos); err != nil {
			return store.Page{}, err
		}
	}
	limit := q.PageLimit()

	index, pkName, skName := indexAttrs(q.Index)
	var e expr
	keyCond := pkName + " = :pk"
	e.val(":pk", str(q.PK))
	b := bounds(q)
	switch {
	case b.prefix != "":
		keyCond += " AND begins_with(" + skName + ", :prefix)"
		e.val(":prefix", str(b.prefix))
	case b.hasLo && b.hasHi:
		keyCond += " AND " + skName + " BETWEEN :lo AND :hi"
		e.val(":lo", str(b.lo))
		e.val(":hi", str(b.hi))
	case b.hasLo:
		keyCond += " AND " + skName + " >= :lo"
		e.val(":lo", str(b.lo))
	case b.hasHi:
		keyCond += " AND " + skName + " <= :hi"
		e.val(":hi", str(b.hi))
	}
	filter := "attribute_not_exists(#exp) OR #exp > :now"
	e.val(":now", num(s.now().Unix()))
	e.expressions = []string{keyCond, filter}

	items := make([]store.Item, 0, min(limit+1, 64))
	evaluate := limit + 1
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			IndexName:                 index,
			KeyConditionExpression:    aws.String(keyCond),
			FilterExpression:          aws.String(filter),
			ExpressionAttributeNames:  e.names(),
			ExpressionAttributeValues: e.vals(),
			ScanIndexForward:          aws.Bool(!q.Reverse),
			Limit:                     aws.Int32(int32(evaluate)),
			ExclusiveStartKey:         start,
			// Indexes cannot read consistently; the table can, and then behaves like
			// the SQLite store (a list right after a write shows it).
			ConsistentRead: aws.Bool(index == nil),
		})
		if err != nil {
			return store.Page{}, wrapErr(ctx, "query", err)
		}
		for _, av := range out.Items {
			it, err := decodeItem(av)
			if err != nil {
				return store.Page{}, fmt.Errorf("dynamo: query: %w", err)
			}
			items = append(items, it)
		}
		if len(items) > limit || out.LastEvaluatedKey == nil {
			break
		}
		start = out.LastEvaluatedKey
		need := limit + 1 - len(items)
		if out.ScannedCount > out.Count {
			evaluate = min(max(need, 2*evaluate), store.MaxQueryLimit+1)
		} else {
			evaluate = need // cut short by the 1 MB response limit, not by expired items
		}
	}
	page := store.Page{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.Next = store.EncodeCursor(queryShape(q), store.Position(q.Index, items[limit-1]))
	}
	return page, nil
}

// startKey turns a cursor position into an ExclusiveStartKey: the table key, plus the
// index key for an index query. The keys are checked as a write would check them, since a
// forged cursor could otherwise make DynamoDB answer with a validation error (a 500)
// rather than the 400 an invalid cursor deserves.
func startKey(q store.Query, pos []string) (map[string]types.AttributeValue, error) {
	if q.Index == store.Primary {
		k := store.Key{PK: q.PK, SK: pos[0]}
		if err := k.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrInvalidCursor, err)
		}
		return keyAttrs(k), nil
	}
	it := store.Item{Key: store.Key{PK: pos[1], SK: pos[2]}}
	ik := store.IndexKey{PK: q.PK, SK: pos[0]}
	if q.Index == store.GSI1 {
		it.GSI1 = ik
	} else {
		it.GSI2 = ik
	}
	av, err := encodeItem(it)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrInvalidCursor, err)
	}
	_, pkAttr, skAttr := indexAttrs(q.Index)
	return map[string]types.AttributeValue{
		AttrPK: av[AttrPK], AttrSK: av[AttrSK],
		attrFor(pkAttr): av[attrFor(pkAttr)], attrFor(skAttr): av[attrFor(skAttr)],
	}, nil
}
