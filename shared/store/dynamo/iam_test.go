package dynamo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// sent records the IAM actions of the calls a client sends: its operation, and for a
// transaction the action of each item (as IAM authorizes TransactWriteItems).
type sent struct {
	mu      sync.Mutex
	actions []string
}

func (s *sent) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.actions
	s.actions = nil
	slices.Sort(out)
	return slices.Compact(out)
}

func (s *sent) record(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("recordActions",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			var got []string
			switch p := in.Parameters.(type) {
			case *dynamodb.GetItemInput:
				got = append(got, ActionGetItem)
			case *dynamodb.PutItemInput:
				got = append(got, ActionPutItem)
			case *dynamodb.DeleteItemInput:
				got = append(got, ActionDeleteItem)
			case *dynamodb.UpdateItemInput:
				got = append(got, ActionUpdateItem)
			case *dynamodb.QueryInput:
				got = append(got, ActionQuery)
			case *dynamodb.BatchGetItemInput:
				got = append(got, ActionBatchGetItem)
			case *dynamodb.TransactWriteItemsInput:
				for _, it := range p.TransactItems {
					switch {
					case it.Put != nil:
						got = append(got, ActionPutItem)
					case it.Delete != nil:
						got = append(got, ActionDeleteItem)
					case it.Update != nil:
						got = append(got, ActionUpdateItem)
					case it.ConditionCheck != nil:
						got = append(got, ActionConditionCheckItem)
					}
				}
			default:
				got = append(got, fmt.Sprintf("unexpected %T", p))
			}
			s.mu.Lock()
			s.actions = append(s.actions, got...)
			s.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// Actions is the Store's account of what it sends; this holds it to what it really sends,
// on every path (an Add that finds its item expired included), so that the IAM table built
// from it grants what the code needs.
func TestActionsAreWhatTheStoreSends(t *testing.T) {
	e := needEmulator(t)
	rec := &sent{}
	client, err := newClient(t.Context(), os.Getenv(endpointEnv), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, rec.record)
	})
	require.NoError(t, err)
	clock := newClock()
	st := New(client, e.table, WithClock(clock.Now))
	ctx := t.Context()
	ns := fmt.Sprintf("iam-%016x/", rand.Uint64())
	key := func(sk string) store.Key { return store.Key{PK: ns + "p", SK: sk} }

	check := func(name, method string, writes []store.Write, call func() error) {
		t.Helper()
		rec.take()
		require.NoError(t, call(), name)
		got := rec.take()
		want := Actions(method, writes)
		require.NotEmpty(t, got, name)
		for _, a := range got {
			assert.Contains(t, want, a, "%s sent %s, which Actions(%q) leaves out", name, a, method)
		}
	}
	check("put", "Put", nil, func() error { return st.Put(ctx, store.Item{Key: key("a"), Revision: 1}, store.MustNotExist) })
	check("get", "Get", nil, func() error { _, err := st.Get(ctx, key("a")); return err })
	check("get many", "GetMany", nil, func() error { _, err := st.GetMany(ctx, []store.Key{key("a"), key("z")}); return err })
	check("query", "Query", nil, func() error { _, err := st.Query(ctx, store.Query{PK: ns + "p"}); return err })
	check("add", "Add", nil, func() error { _, err := st.Add(ctx, key("n"), 1, time.Time{}); return err })
	// An Add on an expired item replaces it (PutItem after the failed UpdateItem).
	check("add, expiring", "Add", nil, func() error { _, err := st.Add(ctx, key("x"), 1, clock.Now().Add(time.Second)); return err })
	clock.Advance(time.Hour)
	check("add on an expired item", "Add", nil, func() error { _, err := st.Add(ctx, key("x"), 1, time.Time{}); return err })
	writes := []store.Write{
		store.PutOp(store.Item{Key: key("b"), Revision: 1}, store.MustNotExist),
		store.CheckOp(key("a"), store.MustExist),
		store.AddOp(key("n"), 1, time.Time{}),
		store.DeleteOp(key("n2"), store.Always),
	}
	check("transact", "Transact", writes, func() error { return st.Transact(ctx, writes) })
	check("delete", "Delete", nil, func() error { return st.Delete(ctx, key("a"), store.MustExist) })

	// And the account is not padded: the plain operations need exactly what they send.
	for method, want := range map[string][]string{"Get": {ActionGetItem}, "GetMany": {ActionBatchGetItem}, "Put": {ActionPutItem}, "Delete": {ActionDeleteItem}, "Query": {ActionQuery}} {
		assert.Equal(t, want, Actions(method, nil), method)
	}
	assert.Equal(t, []string{ActionConditionCheckItem, ActionDeleteItem, ActionPutItem, ActionUpdateItem}, Actions("Transact", writes))
}
