package dynamo

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/store"
)

// The PAT limit on DynamoDB: 150 concurrent creations for one user leave exactly 100
// tokens (a 503, store.ErrUnavailable, is retried as a client would); once ten have expired,
// ten more fit.
func TestPATLimitUnderConcurrency(t *testing.T) {
	needEmulator(t)
	clock := newClock()
	st, _ := open(t, WithClock(clock.Now))
	svc := auth.NewService(st, clock.Now, nil)
	ctx := t.Context()
	acct, owner, err := svc.CreateAccount(ctx, "Acme")
	require.NoError(t, err)
	soon, later := clock.Now().Add(time.Hour), clock.Now().Add(48*time.Hour)
	issue := func(i int) error {
		exp := later
		if i%15 == 0 {
			exp = soon
		}
		_, _, err := svc.IssuePAT(ctx, acct.ID, owner.ID, fmt.Sprint("t", i), auth.Scopes{"bots:read"}, exp)
		return err
	}
	errs := make([]error, 150)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range errs {
		wg.Go(func() { <-begin; errs[i] = issue(i) })
	}
	close(begin)
	wg.Wait()
	created, limited, busy := 0, 0, 0
	for i, err := range errs {
		if errors.Is(err, store.ErrUnavailable) {
			busy++
			err = issue(i)
		}
		switch {
		case err == nil:
			created++
		case errors.Is(err, auth.ErrLimitReached):
			limited++
		default:
			t.Errorf("creation %d: %v", i, err)
		}
	}
	t.Logf("%d created, %d at the limit, %d busy at first", created, limited, busy)
	require.Equal(t, auth.MaxPATsPerUser, created)
	assert.Equal(t, 150-auth.MaxPATsPerUser, limited)

	// Some of the 100 expire: at the limit, the count is taken again and their places are free.
	clock.Advance(2 * time.Hour)
	freed := 0
	for {
		_, _, err := svc.IssuePAT(ctx, acct.ID, owner.ID, "after", auth.Scopes{"bots:read"}, later)
		if errors.Is(err, auth.ErrLimitReached) {
			break
		}
		require.NoError(t, err)
		freed++
		require.Less(t, freed, auth.MaxPATsPerUser, "the limit must hold")
	}
	assert.Positive(t, freed, "expired tokens give their places back")
}
