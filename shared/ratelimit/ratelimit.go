// Package ratelimit counts calls in fixed windows kept in the store, so that every process
// (every Lambda instance) shares one count: test sends per bot, public events per origin.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Limit allows Max calls per Window for each key.
type Limit struct {
	// Name tells limits apart in the store and in the 429's detail ("test sends").
	Name   string
	Max    int64
	Window time.Duration
}

// Limiter applies limits through a store's atomic counters.
type Limiter struct {
	store store.Store
	now   func() time.Time
}

// New returns a Limiter over st.
func New(st store.Store, now func() time.Time) *Limiter { return &Limiter{store: st, now: now} }

// Allow counts one call of key against l. Over the limit it returns a 429 rate_limited
// *httpapi.Error carrying the seconds until the window ends (RetryAfter sets the header).
// The window's counter expires with the window, so keys cost nothing once quiet.
func (lim *Limiter) Allow(ctx context.Context, l Limit, key string) error {
	now := lim.now()
	start := now.Truncate(l.Window)
	end := start.Add(l.Window)
	k := store.Key{PK: "RATE#" + l.Name + "#" + key, SK: strconv.FormatInt(start.Unix(), 10)}
	// Kept a window past its end: a clock a little behind must not find it gone and restart.
	n, err := lim.store.Add(ctx, k, 1, end.Add(l.Window))
	if err != nil {
		return fmt.Errorf("rate limit %s: %w", l.Name, err)
	}
	if n > l.Max {
		wait := int64(math.Ceil(end.Sub(now).Seconds()))
		return httpapi.Errorf(httpapi.KindTooManyRequests, "rate_limited", "too many %s: at most %d per %s; retry in %d s", l.Name, l.Max, l.Window, wait).
			With("retry_after_seconds", wait)
	}
	return nil
}
