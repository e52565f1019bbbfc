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
	"slices"
	"strconv"
	"strings"
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

// Keys: the entries of a bot are kept in blocks, one partition a bot, newest last. The
// entries a Write records for one bot form a batch; its entries of one route, status class
// and token form blocks of a few entries, each an item whose sort key is the batch's (its
// newest entry's id) and the block's number in it, and which is in one secondary index per
// filter (status class, route), so a filtered list never scans. Synchronous recording (a
// Lambda, an entry a request) makes a block of one entry; the local process's buffered
// recorder writes a tenth of a second of requests as one batch, about six entries an item
// instead of one, and so a sixth of the B-tree entries and statements.
func partition(bot string) string { return "BOT#" + bot + "#REQLOG" }

func classPartition(bot, class string) string { return partition(bot) + "#STATUS#" + class }

func routePartition(bot, route string) string { return partition(bot) + "#ROUTE#" + route }

// blockKey is the sort key of a batch's n-th block: the batch's key (its newest entry's id,
// unique as ids are), then the block's number, fixed width so that blocks sort in order.
func blockKey(batch string, n int) string { return fmt.Sprintf("%s#%04d", batch, n) }

// batchOf is the batch key of a block's sort key.
func batchOf(sk string) string {
	if i := strings.LastIndexByte(sk, '#'); i >= 0 {
		return sk[:i]
	}
	return sk
}

// maxBatch bounds the entries of one batch, so that a block's number fits its four digits.
const maxBatch = 1000

// maxRow is what a block's item may weigh, keys and all, for SQLite to keep it in its
// B-tree page: the local store's table is clustered on its key (WITHOUT ROWID), where a row
// longer than about a quarter of a 4 KiB page spills into overflow pages, and every search
// that passes such a row in an interior page reads them (measured: point reads of bots
// became 80 % page reads with blocks of a hundred entries). A block takes entries while it
// fits, and at least one.
const maxRow = 900

// block is one item's entries: some of one batch of one bot with one method, route, status
// class and token. What they share is stored once.
type block struct {
	BotID     string       `json:"bot_id"`
	Method    string       `json:"method"`
	Route     string       `json:"route"`
	TokenID   string       `json:"token_id"`
	TokenKind string       `json:"token_kind"`
	Entries   []blockEntry `json:"entries"`
}

// blockEntry is what is an entry's own, in short names: an item holds a few.
type blockEntry struct {
	ID        string  `json:"i"`
	Time      int64   `json:"t"` // Unix milliseconds
	Status    int     `json:"s"`
	LatencyMS float64 `json:"l"`
	RequestID string  `json:"r"`
}

// size is about what the entry adds to a block's JSON, with room to spare.
func (e blockEntry) size() int { return len(e.ID) + len(e.RequestID) + 64 }

// Log stores and lists entries.
type Log struct {
	store store.Store
}

// NewLog returns a Log over s.
func NewLog(s store.Store) *Log { return &Log{store: s} }

// Write stores entries as blocks, up to store.MaxTransactWrites blocks a transaction.
func (l *Log) Write(ctx context.Context, entries ...Entry) error {
	for len(entries) > maxBatch {
		if err := l.Write(ctx, entries[:maxBatch]...); err != nil {
			return err
		}
		entries = entries[maxBatch:]
	}
	items, err := blocks(entries)
	if err != nil {
		return err
	}
	for len(items) > 0 {
		n := min(len(items), store.MaxTransactWrites)
		writes := make([]store.Write, n)
		for i, it := range items[:n] {
			writes[i] = store.PutOp(it, store.Always)
		}
		if err := l.store.Transact(ctx, writes); err != nil {
			return fmt.Errorf("reqlog: write %d blocks: %w", n, err)
		}
		items = items[n:]
	}
	return nil
}

// blocks groups at most maxBatch entries into their blocks' items.
func blocks(entries []Entry) ([]store.Item, error) {
	type group struct {
		bot, method, route, class, token, kind string
	}
	type open struct {
		b      block
		size   int       // of the item so far, keys included
		newest time.Time // the block expires with its newest entry
	}
	batches := map[string]string{} // bot -> its batch key, the newest id
	for _, e := range entries {
		batches[e.BotID] = max(batches[e.BotID], e.ID)
	}
	var items []store.Item
	numbers := map[string]int{} // bot -> blocks numbered so far
	closeBlock := func(g group, o *open) error {
		data, err := store.Encode(o.b)
		if err != nil {
			return err
		}
		sk := blockKey(batches[g.bot], numbers[g.bot])
		numbers[g.bot]++
		items = append(items, store.Item{
			Key:       store.Key{PK: partition(g.bot), SK: sk},
			GSI1:      store.IndexKey{PK: classPartition(g.bot, g.class), SK: sk},
			GSI2:      store.IndexKey{PK: routePartition(g.bot, g.route), SK: sk},
			Revision:  1,
			Data:      data,
			ExpiresAt: o.newest.Add(Retention),
		})
		return nil
	}
	var order []group
	opened := map[group]*open{}
	for _, e := range entries {
		g := group{e.BotID, e.Method, e.Route, StatusClass(e.Status), e.TokenID, e.TokenKind}
		be := blockEntry{ID: e.ID, Time: e.Time.UnixMilli(), Status: e.Status, LatencyMS: e.LatencyMS, RequestID: e.RequestID}
		o := opened[g]
		if o != nil && o.size+be.size() > maxRow {
			if err := closeBlock(g, o); err != nil {
				return nil, err
			}
			o = nil
		}
		if o == nil {
			o = &open{b: block{BotID: e.BotID, Method: e.Method, Route: e.Route, TokenID: e.TokenID, TokenKind: e.TokenKind}}
			// The keys (partition, sort key and two index keys, the bot and route twice)
			// and the shared members, with room for the row's own header.
			o.size = 3*len(partition(e.BotID)) + 2*len(e.Route) + 3*(len(e.ID)+5) + 2*len(e.BotID) + len(e.TokenID) + len(e.TokenKind) + 128
			if opened[g] == nil {
				order = append(order, g)
			}
			opened[g] = o
		}
		o.b.Entries = append(o.b.Entries, be)
		o.size += be.size()
		if e.Time.After(o.newest) {
			o.newest = e.Time
		}
	}
	for _, g := range order {
		if err := closeBlock(g, opened[g]); err != nil {
			return nil, err
		}
	}
	return items, nil
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

// maxScans bounds the store queries one page makes before it stops at the next batch: a page
// of a filter with few matches (both filters) may come back short, with next set.
const maxScans = 10

// scanBlocks is the blocks one store query reads.
const scanBlocks = 50

// A list cursor is one of two kinds. "b1|batch|last": the page stopped in that batch, and
// returned from it the entries from last on (last "~" when none), every entry of a later
// batch too; a batch is read whole, so a page may stop in the middle of one. "s1|to|store
// cursor": the page stopped between store pages before it saw any block (a store may
// answer a page of expired items with none), and the listing goes on from the store's
// cursor of the query bounded by to.
const (
	batchCursor = "b1|"
	storeCursor = "s1|"
)

// afterAll is a batch cursor's last id that keeps every entry of its batch (ids are lower
// case letters, digits and '_', all below it).
const afterAll = "~"

// resume is where a page starts: in or before a batch, or at a store cursor.
type resume struct {
	batch, last string // the batch cursor's; last is afterAll for none
	to, store   string // the store cursor's
}

func (r resume) encode() string {
	if r.batch != "" {
		return batchCursor + r.batch + "|" + r.last
	}
	return storeCursor + r.to + "|" + r.store
}

func decodeCursor(c string) (resume, error) {
	var r resume
	var ok bool
	if rest, isBatch := strings.CutPrefix(c, batchCursor); isBatch {
		r.batch, r.last, ok = strings.Cut(rest, "|")
		ok = ok && r.batch != "" && r.last != ""
	} else if rest, isStore := strings.CutPrefix(c, storeCursor); isStore {
		r.to, r.store, ok = strings.Cut(rest, "|")
		ok = ok && r.store != ""
	}
	if !ok {
		// A sealed cursor of another layout (one made before blocks, say).
		return resume{}, httpapi.E(httpapi.KindInvalid, "invalid_cursor", "cursor is malformed, altered, or belongs to another list")
	}
	return r, nil
}

// List returns one page of the bot's entries, newest first: by batch (the order the log
// recorded them in, a tenth of a second at a time locally), and by time within a batch.
// With both filters it reads the route's index and keeps the status class, so a page may
// come back short of limit while next is still set.
func (l *Log) List(ctx context.Context, bot string, f Filter, limit int, cursor string) ([]Entry, string, error) {
	q := store.Query{PK: partition(bot), Reverse: true, Limit: scanBlocks}
	switch {
	case f.Route != "":
		q.Index, q.PK = store.GSI2, routePartition(bot, f.Route)
	case f.StatusClass != "":
		q.Index, q.PK = store.GSI1, classPartition(bot, f.StatusClass)
	}
	var from resume
	if cursor != "" {
		var err error
		if from, err = decodeCursor(cursor); err != nil {
			return nil, "", err
		}
		if from.batch != "" {
			q.To = from.batch + "#~" // the batch's blocks and every older one
		} else {
			q.To, q.Cursor = from.to, from.store
		}
	}
	var (
		out     []Entry
		batch   string  // the batch being gathered
		pending []Entry // its entries
	)
	// emit adds the gathered batch, newest first, to the page. When the page fills in the
	// middle of it, it returns the cursor after the last entry taken.
	emit := func() string {
		slices.SortFunc(pending, func(a, b Entry) int { return strings.Compare(b.ID, a.ID) })
		for _, e := range pending {
			if batch == from.batch && e.ID >= from.last {
				continue // returned by an earlier page
			}
			if len(out) == limit {
				return resume{batch: batch, last: out[len(out)-1].ID}.encode()
			}
			out = append(out, e)
		}
		pending = pending[:0]
		return ""
	}
	for scans := 1; ; scans++ {
		page, err := l.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for _, it := range page.Items {
			b, err := store.Decode[block](it)
			if err != nil {
				return nil, "", err
			}
			if k := batchOf(it.SK); k != batch {
				if batch != "" {
					if next := emit(); next != "" {
						return out, next, nil
					}
				}
				if len(out) == limit || scans >= maxScans {
					return out, resume{batch: k, last: afterAll}.encode(), nil
				}
				batch = k
			}
			for _, e := range b.Entries {
				if f.Route != "" && f.StatusClass != "" && StatusClass(e.Status) != f.StatusClass {
					continue
				}
				pending = append(pending, Entry{ID: e.ID, Time: time.UnixMilli(e.Time).UTC(), BotID: b.BotID, Method: b.Method,
					Route: b.Route, Status: e.Status, LatencyMS: e.LatencyMS, TokenID: b.TokenID, TokenKind: b.TokenKind, RequestID: e.RequestID})
			}
		}
		if page.Next == "" {
			return out, emit(), nil
		}
		if scans >= maxScans && batch == "" {
			// No block seen yet (a store may answer pages of expired items with none): go
			// on from the store's cursor. Past the bound otherwise, the page reads on only
			// to the end of the batch being gathered, whose blocks are at most maxBatch.
			return out, resume{to: q.To, store: page.Next}.encode(), nil
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
	batch := make([]Entry, 0, maxBatch) // one batch of blocks a flush
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
