package dynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// fakeDynamo is a DynamoDB endpoint on 127.0.0.1 that answers from a script, for the
// retry behaviour DynamoDB Local cannot be made to show (it never throttles). It checks
// the request the way DynamoDB's front end does: a POST of JSON 1.0 to /, the operation
// in X-Amz-Target, a SigV4 Authorization header, a body naming the table.
type fakeDynamo struct {
	t      *testing.T
	answer func(op string, n int) (status int, body string) // n counts requests from 1

	mu       sync.Mutex
	ops      []string
	requests []map[string]any
}

func newFake(t *testing.T, answer func(op string, n int) (int, string)) (*fakeDynamo, string) {
	f := &fakeDynamo{t: t, answer: answer}
	srv := httptest.NewServer(f) // listens on 127.0.0.1 only
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	body, err := io.ReadAll(r.Body)
	var req map[string]any
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/" || !ok:
		f.t.Errorf("fake DynamoDB: unexpected %s %s target %q", r.Method, r.URL.Path, r.Header.Get("X-Amz-Target"))
	case r.Header.Get("Content-Type") != "application/x-amz-json-1.0":
		f.t.Errorf("fake DynamoDB: content type %q", r.Header.Get("Content-Type"))
	case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=test/"):
		f.t.Errorf("fake DynamoDB: request not signed: %q", r.Header.Get("Authorization"))
	case err != nil || json.Unmarshal(body, &req) != nil:
		f.t.Errorf("fake DynamoDB: body is not JSON: %q", body)
	}
	f.mu.Lock()
	f.ops = append(f.ops, op)
	f.requests = append(f.requests, req)
	n := len(f.ops)
	f.mu.Unlock()

	status, out := f.answer(op, n)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", fmt.Sprint(crc32.ChecksumIEEE([]byte(out))))
	w.WriteHeader(status)
	io.WriteString(w, out)
}

func (f *fakeDynamo) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ops)
}

func (f *fakeDynamo) request(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[i]
}

func awsError(code, msg string) string {
	return fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, code, msg)
}

const itemBody = `{"Item":{"PK":{"S":"p"},"SK":{"S":"s"},"rev":{"N":"3"},"count":{"N":"0"},"data":{"B":"e30="}}}`

// fastRetries keeps the tests quick while still going through the backoff.
var fastRetries = RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}

func fakeStore(t *testing.T, url string, p RetryPolicy) *Store {
	t.Helper()
	c, err := newClient(t.Context(), url)
	require.NoError(t, err)
	return New(c, "table", WithRetry(p))
}

func TestThrottlingIsRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		code   string
	}{
		{"throttling", 400, "ThrottlingException"},
		{"provisioned throughput", 400, "ProvisionedThroughputExceededException"},
		{"request limit", 400, "RequestLimitExceeded"},
		{"internal error", 500, "InternalServerError"},
		{"transaction conflict on a single write", 400, "TransactionConflictException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, url := newFake(t, func(op string, n int) (int, string) {
				if n <= 3 {
					return tc.status, awsError(tc.code, "slow down")
				}
				return 200, itemBody
			})
			it, err := fakeStore(t, url, fastRetries).Get(t.Context(), store.Key{PK: "p", SK: "s"})
			require.NoError(t, err)
			assert.Equal(t, int64(3), it.Revision)
			assert.Equal(t, []byte(`{}`), it.Data)
			assert.Equal(t, 4, f.count(), "three refusals, then the answer")
		})
	}
}

func TestRetriesRunOutAsUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		code   string
		policy RetryPolicy
		tries  int
	}{
		{"throttling", 400, "ThrottlingException", fastRetries, 4},
		{"provisioned throughput", 400, "ProvisionedThroughputExceededException", fastRetries, 4},
		{"internal error", 500, "InternalServerError", fastRetries, 4},
		{"no retries", 400, "ThrottlingException", RetryPolicy{MaxAttempts: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, url := newFake(t, func(string, int) (int, string) { return tc.status, awsError(tc.code, "slow down") })
			s := fakeStore(t, url, tc.policy)
			_, err := s.Get(t.Context(), store.Key{PK: "p", SK: "s"})
			require.ErrorIs(t, err, store.ErrUnavailable)
			assert.NotErrorIs(t, err, store.ErrNotFound)
			assert.Equal(t, tc.tries, f.count())

			err = s.Put(t.Context(), store.Item{Key: store.Key{PK: "p", SK: "s"}}, store.RevisionIs(1))
			require.ErrorIs(t, err, store.ErrUnavailable)
			assert.NotErrorIs(t, err, store.ErrConditionFailed)
			_, err = s.Add(t.Context(), store.Key{PK: "p", SK: "s"}, 1, time.Time{})
			require.ErrorIs(t, err, store.ErrUnavailable)
			_, err = s.Query(t.Context(), store.Query{PK: "p"})
			require.ErrorIs(t, err, store.ErrUnavailable)
			err = s.Transact(t.Context(), []store.Write{store.CheckOp(store.Key{PK: "p", SK: "s"}, store.MustExist)})
			require.ErrorIs(t, err, store.ErrUnavailable)
			assert.Equal(t, 5*tc.tries, f.count(), "every call retried as often")
		})
	}
}

func TestPermanentErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	f, url := newFake(t, func(string, int) (int, string) {
		return 400, awsError("ValidationException", "One or more parameter values were invalid")
	})
	_, err := fakeStore(t, url, fastRetries).Get(t.Context(), store.Key{PK: "p", SK: "s"})
	require.Error(t, err)
	assert.NotErrorIs(t, err, store.ErrUnavailable)
	assert.NotErrorIs(t, err, store.ErrNotFound)
	assert.NotErrorIs(t, err, store.ErrConditionFailed)
	assert.Equal(t, 1, f.count())
}

func TestConditionFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	f, url := newFake(t, func(string, int) (int, string) {
		return 400, awsError("ConditionalCheckFailedException", "The conditional request failed")
	})
	s := fakeStore(t, url, fastRetries)
	err := s.Put(t.Context(), store.Item{Key: store.Key{PK: "p", SK: "s"}, Revision: 2}, store.RevisionIs(1))
	var ce *store.ConditionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 0, ce.Index)
	assert.Equal(t, 1, f.count())

	// The request carried the condition as DynamoDB takes it.
	req := f.request(0)
	assert.Equal(t, "(attribute_exists(#pk) AND (attribute_not_exists(#exp) OR #exp > :now)) AND #rev = :rev", req["ConditionExpression"])
	assert.Equal(t, map[string]any{"#pk": "PK", "#exp": "expires", "#rev": "rev"}, req["ExpressionAttributeNames"])
	assert.Equal(t, map[string]any{"N": "1"}, req["ExpressionAttributeValues"].(map[string]any)[":rev"])
}

func cancelled(codes ...string) string {
	reasons := make([]map[string]string, len(codes))
	for i, c := range codes {
		reasons[i] = map[string]string{"Code": c}
	}
	b, _ := json.Marshal(map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"message":             "Transaction cancelled, please refer cancellation reasons for specific reasons",
		"CancellationReasons": reasons,
	})
	return string(b)
}

func TestTransactionConflicts(t *testing.T) {
	t.Parallel()
	writes := []store.Write{
		store.PutOp(store.Item{Key: store.Key{PK: "p", SK: "a"}}, store.MustNotExist),
		store.CheckOp(store.Key{PK: "p", SK: "b"}, store.MustExist),
	}

	t.Run("retried with a new token each time", func(t *testing.T) {
		t.Parallel()
		f, url := newFake(t, func(op string, n int) (int, string) {
			if n <= 2 {
				return 400, cancelled("None", "TransactionConflict")
			}
			return 200, `{}`
		})
		require.NoError(t, fakeStore(t, url, fastRetries).Transact(t.Context(), writes))
		require.Equal(t, 3, f.count())
		tokens := map[any]bool{}
		for i := range 3 {
			tokens[f.request(i)["ClientRequestToken"]] = true
		}
		assert.Len(t, tokens, 3, "a cancelled transaction is sent again as a new one")
	})

	t.Run("until the policy runs out", func(t *testing.T) {
		t.Parallel()
		f, url := newFake(t, func(string, int) (int, string) { return 400, cancelled("TransactionConflict", "None") })
		err := fakeStore(t, url, fastRetries).Transact(t.Context(), writes)
		require.ErrorIs(t, err, store.ErrUnavailable)
		assert.NotErrorIs(t, err, store.ErrConditionFailed)
		assert.Equal(t, fastRetries.MaxAttempts, f.count())
	})

	t.Run("a failed condition is reported at once", func(t *testing.T) {
		t.Parallel()
		f, url := newFake(t, func(string, int) (int, string) { return 400, cancelled("None", "ConditionalCheckFailed") })
		err := fakeStore(t, url, fastRetries).Transact(t.Context(), writes)
		var ce *store.ConditionError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, 1, ce.Index)
		assert.Equal(t, 1, f.count())
	})

	t.Run("throttling is retried by the SDK with the same token", func(t *testing.T) {
		t.Parallel()
		// The same token makes a retry after a lost response idempotent.
		f, url := newFake(t, func(op string, n int) (int, string) {
			if n == 1 {
				return 400, awsError("ThrottlingException", "slow down")
			}
			return 200, `{}`
		})
		require.NoError(t, fakeStore(t, url, fastRetries).Transact(t.Context(), writes))
		require.Equal(t, 2, f.count())
		assert.Equal(t, f.request(0)["ClientRequestToken"], f.request(1)["ClientRequestToken"])
	})
}

func TestBackoffStopsWithTheContext(t *testing.T) {
	t.Parallel()
	_, url := newFake(t, func(string, int) (int, string) { return 400, awsError("ThrottlingException", "slow down") })
	s := fakeStore(t, url, RetryPolicy{MaxAttempts: 100, BaseDelay: 200 * time.Millisecond, MaxDelay: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	started := time.Now()
	_, err := s.Get(ctx, store.Key{PK: "p", SK: "s"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(started), 2*time.Second)
}

func TestBackoffDelays(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}.withDefaults()
	assert.Equal(t, 8, p.MaxAttempts, "zero fields take the defaults")
	for n, ceiling := range map[int]time.Duration{1: 10, 2: 20, 3: 40, 4: 80, 5: 100, 30: 100} {
		ceiling *= time.Millisecond
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.backoff().Delay(n)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, ceiling, "retry %d", n)
			seen[d] = true
		}
		assert.Greater(t, len(seen), 100, "retry %d: delays are jittered", n)
	}
	d := DefaultRetryPolicy()
	assert.Equal(t, RetryPolicy{MaxAttempts: 8, BaseDelay: 25 * time.Millisecond, MaxDelay: time.Second}, d)
}

// BatchGetItem may answer part of the keys and hand the rest back as UnprocessedKeys: they
// are asked again (only they), and a call that still has some after the policy's last
// attempt is unavailable, not a partial answer.
func TestGetManyAsksUnprocessedKeysAgain(t *testing.T) {
	t.Parallel()
	const first = `{"Responses":{"table":[{"PK":{"S":"p"},"SK":{"S":"a"},"rev":{"N":"1"},"count":{"N":"0"}}]},
		"UnprocessedKeys":{"table":{"Keys":[{"PK":{"S":"p"},"SK":{"S":"b"}}],"ConsistentRead":true}}}`
	const second = `{"Responses":{"table":[{"PK":{"S":"p"},"SK":{"S":"b"},"rev":{"N":"2"},"count":{"N":"0"}}]},"UnprocessedKeys":{}}`
	f, url := newFake(t, func(op string, n int) (int, string) {
		if n == 1 {
			return 200, first
		}
		return 200, second
	})
	keys := []store.Key{{PK: "p", SK: "b"}, {PK: "p", SK: "a"}, {PK: "p", SK: "a"}, {PK: "p", SK: "c"}}
	got, err := fakeStore(t, url, fastRetries).GetMany(t.Context(), keys)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 1, 1, 0}, []int64{got[0].Revision, got[1].Revision, got[2].Revision, got[3].Revision})
	assert.Equal(t, store.Item{}, got[3])
	require.Equal(t, 2, f.count())
	asked := func(i int) int {
		items := f.request(i)["RequestItems"].(map[string]any)["table"].(map[string]any)
		assert.Equal(t, true, items["ConsistentRead"])
		return len(items["Keys"].([]any))
	}
	assert.Equal(t, 3, asked(0), "a repeated key is asked once")
	assert.Equal(t, 1, asked(1), "then only the unprocessed one")

	f, url = newFake(t, func(string, int) (int, string) { return 200, first })
	_, err = fakeStore(t, url, fastRetries).GetMany(t.Context(), keys)
	require.ErrorIs(t, err, store.ErrUnavailable)
	assert.Equal(t, fastRetries.MaxAttempts, f.count())
}
