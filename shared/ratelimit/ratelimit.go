// Package ratelimit counts calls in windows kept in the store, so that every process (every
// Lambda instance) shares one count: fixed windows for high limits (test sends per bot,
// public events per origin), a sliding window for small ones (CRM OAuth starts per account).
package ratelimit

import (
	"context"
	"errors"
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

// slidingLog is the stored state of a sliding limit: the times of the calls counted in the
// last window, oldest first (at most Max of them).
type slidingLog struct {
	Calls []time.Time `json:"calls"`
}

// slidingAttempts bounds how often AllowSliding redoes its write after losing a race.
const slidingAttempts = 8

// AllowSliding counts one call of key against l in a sliding window: at most l.Max calls in
// any l.Window, not per calendar window as Allow counts (which lets 2*Max through across a
// window's end). It keeps the last Max call times in one item, written under its revision,
// so concurrent calls of every process are counted once each. It suits small limits (a few
// calls a minute), which is where the difference matters; over the limit it returns the
// same 429 rate_limited as Allow, with the seconds until the oldest call leaves the window.
func (lim *Limiter) AllowSliding(ctx context.Context, l Limit, key string) error {
	k := store.Key{PK: "RATE#" + l.Name + "#" + key, SK: "SLIDING"}
	for range slidingAttempts {
		now := lim.now()
		var log slidingLog
		cond := store.MustNotExist
		var rev int64
		it, err := lim.store.Get(ctx, k)
		switch {
		case err == nil:
			if log, err = store.Decode[slidingLog](it); err != nil {
				return fmt.Errorf("rate limit %s: %w", l.Name, err)
			}
			rev, cond = it.Revision, store.RevisionIs(it.Revision)
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("rate limit %s: %w", l.Name, err)
		}
		recent := log.Calls[:0]
		for _, c := range log.Calls {
			if now.Sub(c) < l.Window {
				recent = append(recent, c)
			}
		}
		if int64(len(recent)) >= l.Max {
			wait := int64(math.Ceil(recent[int64(len(recent))-l.Max].Add(l.Window).Sub(now).Seconds()))
			return httpapi.Errorf(httpapi.KindTooManyRequests, "rate_limited", "too many %s: at most %d per %s; retry in %d s", l.Name, l.Max, l.Window, wait).
				With("retry_after_seconds", max(wait, 1))
		}
		log.Calls = append(recent, now)
		b, err := store.Encode(log)
		if err != nil {
			return err
		}
		// The item outlives its newest call by a window; a quiet key costs nothing after.
		err = lim.store.Put(ctx, store.Item{Key: k, Revision: rev + 1, Data: b, ExpiresAt: store.SecondsPrecision(now.Add(l.Window + time.Second))}, cond)
		if errors.Is(err, store.ErrConditionFailed) {
			continue // another call was counted meanwhile: count again on what it wrote
		}
		if err != nil {
			return fmt.Errorf("rate limit %s: %w", l.Name, err)
		}
		return nil
	}
	return httpapi.Errorf(httpapi.KindUnavailable, "temporarily_unavailable", "too many concurrent %s; retry shortly", l.Name)
}
