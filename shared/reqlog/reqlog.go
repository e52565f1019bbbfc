// Package reqlog keeps each bot's request log: one entry per API request made against the bot
// (time, method, route template, status, latency, token id and kind, request id), never a
// body, a header or a query string, kept for 30 days. The kernel records (httpapi's
// RequestRecorder); the request-logs route family lists.
package reqlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// Retention is how long an entry is kept.
const Retention = 30 * 24 * time.Hour

// Entry is one logged request.
type Entry struct {
	ID        string    `json:"id"`
	Time      time.Time `json:"time"`
	BotID     string    `json:"bot_id"`
	Method    string    `json:"method"`
	Route     string    `json:"route"`
	Status    int       `json:"status"`
	LatencyMS float64   `json:"latency_ms"`
	TokenID   string    `json:"token_id"`
	TokenKind string    `json:"token_kind"`
	RequestID string    `json:"request_id"`
}

// FromRecord turns the kernel's record into an entry.
func FromRecord(r httpapi.RequestRecord) Entry {
	return Entry{
		ID:        ids.At("rlg", r.Time),
		Time:      r.Time.UTC().Truncate(time.Millisecond),
		BotID:     r.BotID,
		Method:    r.Method,
		Route:     r.Route,
		Status:    r.Status,
		LatencyMS: float64(r.Latency.Microseconds()) / 1000,
		TokenID:   r.TokenID,
		TokenKind: r.TokenKind,
		RequestID: r.RequestID,
	}
}

// StatusClass is "2xx", "4xx", ... for a status.
func StatusClass(status int) string { return strconv.Itoa(status/100) + "xx" }

// Keys: the entries of a bot in one partition, newest last by id; one secondary index per
// filter (status class, route) so a filtered list never scans.
func partition(bot string) string { return "BOT#" + bot + "#REQLOG" }

func classPartition(bot, class string) string { return partition(bot) + "#STATUS#" + class }

func routePartition(bot, route string) string { return partition(bot) + "#ROUTE#" + route }

// Log stores and lists entries.
type Log struct {
	store store.Store
}

// NewLog returns a Log over s.
func NewLog(s store.Store) *Log { return &Log{store: s} }

func (l *Log) item(e Entry) (store.Item, error) {
	b, err := store.Encode(e)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:       store.Key{PK: partition(e.BotID), SK: e.ID},
		GSI1:      store.IndexKey{PK: classPartition(e.BotID, StatusClass(e.Status)), SK: e.ID},
		GSI2:      store.IndexKey{PK: routePartition(e.BotID, e.Route), SK: e.ID},
		Revision:  1,
		Data:      b,
		ExpiresAt: e.Time.Add(Retention),
	}, nil
}

// Write stores entries, up to store.MaxTransactWrites per transaction.
func (l *Log) Write(ctx context.Context, entries ...Entry) error {
	for len(entries) > 0 {
		n := min(len(entries), store.MaxTransactWrites)
		writes := make([]store.Write, 0, n)
		for _, e := range entries[:n] {
			it, err := l.item(e)
			if err != nil {
				return err
			}
			writes = append(writes, store.PutOp(it, store.Always))
		}
		if err := l.store.Transact(ctx, writes); err != nil {
			return fmt.Errorf("reqlog: write %d entries: %w", n, err)
		}
		entries = entries[n:]
	}
	return nil
}

// RecordRequest implements httpapi.RequestRecorder synchronously (AWS: a Lambda may be
// frozen right after it answers, so nothing may be left for later).
func (l *Log) RecordRequest(ctx context.Context, r httpapi.RequestRecord) error {
	return l.Write(ctx, FromRecord(r))
}

// Filter narrows a listing. Zero values mean "any".
type Filter struct {
	StatusClass string // "2xx", "3xx", "4xx" or "5xx"
	Route       string // a route template, e.g. "GET /api/bots/{botID}"
}

// maxScans bounds the queries one filtered page may make when both filters are given.
const maxScans = 10

// List returns one page of the bot's entries, newest first. With both filters it reads the
// route's index and keeps the status class, so a page may come back short of limit while
// next is still set.
func (l *Log) List(ctx context.Context, bot string, f Filter, limit int, cursor string) ([]Entry, string, error) {
	q := store.Query{PK: partition(bot), Reverse: true, Limit: limit, Cursor: cursor}
	switch {
	case f.Route != "":
		q.Index, q.PK = store.GSI2, routePartition(bot, f.Route)
	case f.StatusClass != "":
		q.Index, q.PK = store.GSI1, classPartition(bot, f.StatusClass)
	}
	var out []Entry
	for scans := 0; ; scans++ {
		q.Limit = limit - len(out)
		page, err := l.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for _, it := range page.Items {
			e, err := store.Decode[Entry](it)
			if err != nil {
				return nil, "", err
			}
			if f.Route != "" && f.StatusClass != "" && StatusClass(e.Status) != f.StatusClass {
				continue
			}
			out = append(out, e)
		}
		if page.Next == "" || len(out) >= limit || scans+1 >= maxScans {
			return out, page.Next, nil
		}
		q.Cursor = page.Next
	}
}

// Buffered records entries in batches from a background goroutine, so that logging a request
// costs the request no store write: the local process uses it (SQLite has one writer, and a
// write per read would halve the API's read throughput). Close flushes what is buffered.
type Buffered struct {
	log      *Log
	logger   *slog.Logger
	ch       chan Entry
	done     chan struct{}
	interval time.Duration
	once     sync.Once
}

// NewBuffered starts a buffered recorder writing to log at least every interval.
func NewBuffered(log *Log, logger *slog.Logger, interval time.Duration) *Buffered {
	b := &Buffered{log: log, logger: logger, ch: make(chan Entry, 4096), done: make(chan struct{}), interval: interval}
	go b.run()
	return b
}

// RecordRequest implements httpapi.RequestRecorder. When the buffer is full it waits for room
// (back pressure) rather than drop an entry.
func (b *Buffered) RecordRequest(ctx context.Context, r httpapi.RequestRecord) error {
	select {
	case b.ch <- FromRecord(r):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Buffered) run() {
	defer close(b.done)
	t := time.NewTicker(b.interval)
	defer t.Stop()
	batch := make([]Entry, 0, store.MaxTransactWrites)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if err := b.log.Write(context.Background(), batch...); err != nil {
			b.logger.Error("request log entries lost", "count", len(batch), "error", err)
		}
		batch = batch[:0]
	}
	for {
		select {
		case e, ok := <-b.ch:
			if !ok {
				flush()
				return
			}
			batch = append(batch, e)
			if len(batch) == cap(batch) {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

// Close flushes buffered entries and stops; recording after Close panics, so close it after
// the HTTP server has stopped.
func (b *Buffered) Close(ctx context.Context) error {
	b.once.Do(func() { close(b.ch) })
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return errors.New("reqlog: buffered entries not flushed before the deadline")
	}
}

// PurgeStep erases a deleted bot's request log (job purge.Job): its one partition, with
// which its index entries go.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: partition(p.BotID)}}, nil
	})
}
