package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botplatform/api/shared/store"
)

// Transact implements store.Store with one TransactWriteItems call per attempt.
//
// A cancelled transaction wrote nothing, so sending it again is always safe. It is sent
// again when DynamoDB cancelled it for a transient reason (a conflict with another
// transaction, throttling), with backoff, until the retry policy runs out
// (store.ErrUnavailable); and when an AddOp guessed wrong whether its item had expired
// (see the package doc), at once with the other form. A failed condition of the caller's
// own is reported as the *store.ConditionError of the first write that failed.
func (s *Store) Transact(ctx context.Context, writes []store.Write) error {
	if err := store.ValidateTransaction(writes); err != nil {
		return fmt.Errorf("dynamo: transact: %w", err)
	}
	// replace[i] is true when AddOp i last saw an expired item, and is sent as its
	// replacement. Most counters are live or absent, so the first attempt increments.
	replace := make([]bool, len(writes))
	retries, rounds := 0, 0
	for {
		now := s.now().Unix()
		items, err := s.transactItems(writes, replace, now)
		if err != nil {
			return fmt.Errorf("dynamo: transact: %w", err)
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return wrapErr(ctx, "transact", err)
		}
		verdict, err := s.judge(ctx, writes, replace, tce, now)
		if err != nil {
			return err
		}
		switch {
		case verdict.transient:
			retries++
			if retries >= s.retry.MaxAttempts {
				return fmt.Errorf("dynamo: transact: %w after %d attempts: %w", store.ErrUnavailable, retries, tce)
			}
			if err := s.retry.backoff().Sleep(ctx, retries); err != nil {
				return fmt.Errorf("dynamo: transact: %w", err)
			}
		case verdict.failed >= 0:
			return &store.ConditionError{Index: verdict.failed}
		case verdict.addsChanged:
			rounds++
			if rounds >= maxAddRounds {
				return fmt.Errorf("dynamo: transact: %w: counters kept changing under %d attempts", store.ErrUnavailable, rounds)
			}
		default:
			return fmt.Errorf("dynamo: transact: cancelled for no reason we know: %w", tce)
		}
	}
}

// verdict is what a cancelled transaction tells us to do next.
type verdict struct {
	transient   bool // send it again after a backoff
	failed      int  // index of the first caller's condition that failed, or -1
	addsChanged bool // some AddOp must switch form; replace was updated
}

// judge reads a TransactionCanceledException's reasons, one per write in order.
func (s *Store) judge(ctx context.Context, writes []store.Write, replace []bool, tce *types.TransactionCanceledException, now int64) (verdict, error) {
	v := verdict{failed: -1}
	if len(tce.CancellationReasons) != len(writes) {
		return v, fmt.Errorf("dynamo: transact: %d cancellation reasons for %d writes: %w", len(tce.CancellationReasons), len(writes), tce)
	}
	for i, r := range tce.CancellationReasons {
		code := aws.ToString(r.Code)
		switch {
		case code == "" || code == reasonNone:
		case transientReason(r):
			v.transient = true
		case code == reasonConditionFailed && writes[i].Add == nil:
			if v.failed < 0 {
				v.failed = i
			}
		case code == reasonConditionFailed:
			// An AddOp has no condition of the caller's: its assumption about expiry was
			// wrong, or the increment would overflow.
			add := writes[i].Add
			av := r.Item
			if replace[i] && av == nil {
				// The replacement needs an item to replace: there is none, so increment.
				replace[i], v.addsChanged = false, true
				continue
			}
			old, err := s.oldItem(ctx, add.Key, av)
			if err != nil {
				return v, fmt.Errorf("dynamo: transact: write %d: %w", i, err)
			}
			expired := old != nil && old.Expired(time.Unix(now, 0))
			if !replace[i] && !expired && old != nil {
				return v, fmt.Errorf("dynamo: transact: write %d: %w", i, errOverflow)
			}
			replace[i], v.addsChanged = expired, true
		default:
			return v, fmt.Errorf("dynamo: transact: write %d: %s: %s", i, code, aws.ToString(r.Message))
		}
	}
	return v, nil
}

// transactItems lays the writes out as TransactWriteItems actions.
func (s *Store) transactItems(writes []store.Write, replace []bool, now int64) ([]types.TransactWriteItem, error) {
	table := aws.String(s.table)
	items := make([]types.TransactWriteItem, len(writes))
	for i, w := range writes {
		switch {
		case w.Put != nil:
			av, err := encodeItem(*w.Put)
			if err != nil {
				return nil, fmt.Errorf("write %d: %w", i, err)
			}
			ex, err := condition(w.Cond, now)
			if err != nil {
				return nil, fmt.Errorf("write %d: %w", i, err)
			}
			items[i].Put = &types.Put{
				TableName: table, Item: av, ConditionExpression: ex.cond(),
				ExpressionAttributeNames: ex.names(), ExpressionAttributeValues: ex.vals(),
			}
		case w.Delete != nil:
			ex, err := condition(w.Cond, now)
			if err != nil {
				return nil, fmt.Errorf("write %d: %w", i, err)
			}
			items[i].Delete = &types.Delete{
				TableName: table, Key: keyAttrs(*w.Delete), ConditionExpression: ex.cond(),
				ExpressionAttributeNames: ex.names(), ExpressionAttributeValues: ex.vals(),
			}
		case w.Check != nil:
			ex, err := checkCondition(w.Cond, now)
			if err != nil {
				return nil, fmt.Errorf("write %d: %w", i, err)
			}
			items[i].ConditionCheck = &types.ConditionCheck{
				TableName: table, Key: keyAttrs(*w.Check), ConditionExpression: ex.cond(),
				ExpressionAttributeNames: ex.names(), ExpressionAttributeValues: ex.vals(),
			}
		case w.Add != nil && replace[i]:
			a := restart(w.Add.Key, w.Add.Delta, w.Add.ExpiresAt, now)
			items[i].Put = &types.Put{
				TableName: table, Item: a.item, ConditionExpression: a.cond(),
				ExpressionAttributeNames: a.names(), ExpressionAttributeValues: a.vals(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}
		case w.Add != nil:
			a := increment(w.Add.Delta, w.Add.ExpiresAt, now)
			items[i].Update = &types.Update{
				TableName: table, Key: keyAttrs(w.Add.Key), UpdateExpression: aws.String(a.update),
				ConditionExpression: a.cond(), ExpressionAttributeNames: a.names(), ExpressionAttributeValues: a.vals(),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}
		}
	}
	return items, nil
}
