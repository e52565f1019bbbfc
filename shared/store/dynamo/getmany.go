package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botplatform/api/shared/store"
)

// GetMany implements store.Store with BatchGetItem (strongly consistent, as Get). DynamoDB
// may leave keys unprocessed when it throttles or the answer would pass 16 MB; they are
// asked again after the policy's backoff, and a call that still has some after the last
// attempt fails with store.ErrUnavailable. BatchGetItem refuses a repeated key, so each is
// asked once.
func (s *Store) GetMany(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	if err := store.ValidateKeys(keys); err != nil {
		return nil, fmt.Errorf("dynamo: get many: %w", err)
	}
	out := make([]store.Item, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	at := make(map[store.Key][]int, len(keys))
	ask := make([]map[string]types.AttributeValue, 0, len(keys))
	for i, k := range keys {
		if _, seen := at[k]; !seen {
			ask = append(ask, keyAttrs(k))
		}
		at[k] = append(at[k], i)
	}
	now := s.now()
	for attempt := 1; ; attempt++ {
		res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{
				s.table: {Keys: ask, ConsistentRead: aws.Bool(true)},
			},
		})
		if err != nil {
			return nil, wrapErr(ctx, "get many", err)
		}
		for _, av := range res.Responses[s.table] {
			it, err := decodeItem(av)
			if err != nil {
				return nil, fmt.Errorf("dynamo: get many: %w", err)
			}
			if it.Expired(now) {
				continue
			}
			for _, i := range at[it.Key] {
				out[i] = it
			}
		}
		ask = res.UnprocessedKeys[s.table].Keys
		if len(ask) == 0 {
			return out, nil
		}
		if attempt >= s.retry.MaxAttempts {
			return nil, fmt.Errorf("dynamo: get many: %w: %d keys left unprocessed", store.ErrUnavailable, len(ask))
		}
		if err := s.retry.backoff().Sleep(ctx, attempt); err != nil {
			return nil, wrapErr(ctx, "get many", err)
		}
	}
}
