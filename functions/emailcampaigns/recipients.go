package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// RowState is where one recipient of a campaign is. A row is in exactly one state, and the
// campaign's counts of the states are moved in the transaction that moves the row:
//
//	planned      to be sent (the plan found an address, consent, no suppression)
//	skipped      not sent, for skip_reason (decided by the plan, or by the send on reading
//	             the subscriber again)
//	sending      claimed by a run of the send job, which is sending it now
//	sent         the provider took the message (message_id)
//	failed       the provider refused it for good (error); not retried
//	interrupted  claimed by a run that never said how the send ended (a crash between
//	             claim and mark, or an answer that did not tell): it may or may not have
//	             gone out, and is never sent again. Sending it again is the only way to be
//	             sure, and the one way to send twice: a campaign sends at most once.
//	canceled     still planned when the campaign was canceled
type RowState string

// The row states.
const (
	RowPlanned     RowState = "planned"
	RowSkipped     RowState = "skipped"
	RowSending     RowState = "sending"
	RowSent        RowState = "sent"
	RowFailed      RowState = "failed"
	RowInterrupted RowState = "interrupted"
	RowCanceled    RowState = "canceled"
)

// RowStates lists every row state, for the recipients filter.
func RowStates() []RowState {
	return []RowState{RowPlanned, RowSkipped, RowSending, RowSent, RowFailed, RowInterrupted, RowCanceled}
}

// Recipient is one subscriber's row in a campaign.
type Recipient struct {
	ID           string   `json:"id"`
	SubscriberID string   `json:"subscriber_id"`
	Address      string   `json:"address"`
	State        RowState `json:"state"`
	SkipReason   string   `json:"skip_reason,omitempty"`
	// MessageID is the provider's id of the message sent.
	MessageID   string     `json:"message_id,omitempty"`
	PlannedAt   time.Time  `json:"planned_at"`
	SentAt      *time.Time `json:"sent_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
	Opens       Opens      `json:"opens"`
	// Clicks are the clicks on each tracked link (by its index in the campaign's links).
	Clicks []LinkClicks `json:"clicks"`
	// MachineClicks counts the links followed by machines (security gateways), apart.
	MachineClicks  int64      `json:"machine_clicks"`
	Bounce         *Bounce    `json:"bounce"`
	ComplainedAt   *time.Time `json:"complained_at"`
	UnsubscribedAt *time.Time `json:"unsubscribed_at"`
	// Error is why the provider refused the message (state failed).
	Error *SendFailure `json:"error"`
	// Erased is set once the subscriber was erased: the row keeps what the report counts,
	// not the address (erase.go).
	Erased bool `json:"erased,omitempty"`
}

// Opens counts a recipient's opens: human ones, and apart from them the fetches of privacy
// proxies (Apple Mail Privacy Protection and the like), which open every message.
type Opens struct {
	Count   int64      `json:"count"`
	FirstAt *time.Time `json:"first_at"`
	Machine int64      `json:"machine"`
}

// LinkClicks is a recipient's clicks on one link.
type LinkClicks struct {
	Link  int   `json:"link"`
	Count int64 `json:"count"`
}

// Bounce is a recipient's bounce: permanent (hard) or transient (soft); a permanent one
// overrides a transient one before it.
type Bounce struct {
	Permanent bool      `json:"permanent"`
	At        time.Time `json:"at"`
}

// SendFailure is the provider's refusal of a message.
type SendFailure struct {
	// Code is the SMTP reply code or the provider's HTTP status (0: none).
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// row is a stored recipient row.
type row struct {
	Recipient
	// ClaimedAt is when a run claimed the row (state sending): a claim older than
	// ClaimGrace belongs to a run that is no more.
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	rev       int64
}

func (r row) item(bot, campaign string) (store.Item, error) {
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	it := store.Item{
		Key:      rowKey(bot, campaign, r.ID),
		GSI1:     store.IndexKey{PK: rowStatePK(bot, campaign, r.State), SK: r.ID},
		Revision: r.rev,
		Data:     b,
	}
	if r.MessageID != "" {
		it.GSI2 = store.IndexKey{PK: sentIndexPK(bot), SK: campaign + "#" + r.ID}
	}
	return it, nil
}

func decodeRow(it store.Item) (row, error) {
	r, err := store.Decode[row](it)
	r.rev = it.Revision
	if r.Clicks == nil {
		r.Clicks = []LinkClicks{}
	}
	return r, err
}

// deltas are the counter moves of one transaction, by counter key (a transaction touches
// each key once).
type deltas map[store.Key]int64

func (d deltas) add(bot, campaign, name string, n int64) { d[counterKey(bot, campaign, name)] += n }

// move counts a row leaving from ("" for a new row) for to.
func (d deltas) move(bot, campaign string, from, to RowState) {
	if from == to {
		return
	}
	if from != "" {
		d.add(bot, campaign, "state#"+string(from), -1)
	}
	d.add(bot, campaign, "state#"+string(to), 1)
}

// writes are the AddOps of d, in key order (the same moves always make the same writes).
func (d deltas) writes() []store.Write {
	keys := make([]store.Key, 0, len(d))
	for k, n := range d {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].SK < keys[j].SK })
	out := make([]store.Write, len(keys))
	for i, k := range keys {
		out[i] = store.AddOp(k, d[k], time.Time{})
	}
	return out
}

// rowAttempts bounds how often mutateRow reads a row again after losing a race for it.
const rowAttempts = 8

// errNoChange is what a row change returns to write nothing.
var errNoChange = errors.New("no change")

// mutateRow applies change to the row and writes it under its revision in st, with the
// counter moves and extra writes change returns, in one transaction; it reads the row again
// and retries when another writer got there first. cur is the row as last read (nil: read
// it). change returns errNoChange to write nothing; mutateRow then returns nil.
func mutateRow(ctx context.Context, st store.Store, bot, campaign, id string, cur *row, change func(r *row, d deltas) ([]store.Write, error)) (row, error) {
	for range rowAttempts {
		if cur == nil {
			it, err := st.Get(ctx, rowKey(bot, campaign, id))
			if errors.Is(err, store.ErrNotFound) {
				return row{}, httpapi.NotFound("recipient")
			}
			if err != nil {
				return row{}, err
			}
			r, err := decodeRow(it)
			if err != nil {
				return row{}, err
			}
			cur = &r
		}
		next := *cur
		next.Clicks = slices.Clone(cur.Clicks)
		d := deltas{}
		extra, err := change(&next, d)
		if errors.Is(err, errNoChange) {
			return next, nil
		}
		if err != nil {
			return row{}, err
		}
		d.move(bot, campaign, cur.State, next.State)
		expected := cur.rev
		next.rev = expected + 1
		it, err := next.item(bot, campaign)
		if err != nil {
			return row{}, err
		}
		writes := append([]store.Write{store.PutOp(it, store.RevisionIs(expected))}, extra...)
		err = st.Transact(ctx, append(writes, d.writes()...))
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index == 0 {
			cur = nil
			continue
		}
		if err != nil {
			return row{}, fmt.Errorf("update recipient %s: %w", id, err)
		}
		return next, nil
	}
	return row{}, fmt.Errorf("recipient %s keeps changing: %w", id, store.ErrUnavailable)
}

// mutateRows is mutateRow for many rows at once: change(i, ...) for rows[i], each row
// written under its revision with its counter moves and extra writes, as few
// transactions as store.MaxTransactWrites allows (their counter moves summed). When a
// row of a transaction changed since it was read (its condition failed, so nothing was
// written), that transaction's rows go through mutateRow one by one, which reads a row
// again when it lost: a row lost to another writer never costs the others their change.
// change must decide anew on each call (it may be called again for a row). rows are
// updated to what was written (or, for a row left, to what was last read).
func (s *Service) mutateRows(ctx context.Context, bot, campaign string, rows []row, change func(i int, r *row, d deltas) ([]store.Write, error)) error {
	type pending struct {
		i      int
		next   row
		writes []store.Write
	}
	var (
		batch  []pending
		total  = deltas{}
		writes = 0
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		all := make([]store.Write, 0, writes+len(total))
		for _, p := range batch {
			all = append(all, p.writes...)
		}
		err := s.d.Store.Transact(ctx, append(all, total.writes()...))
		switch {
		case errors.Is(err, store.ErrConditionFailed):
			for _, p := range batch {
				n, err := mutateRow(ctx, s.d.Store, bot, campaign, rows[p.i].ID, &rows[p.i], func(r *row, d deltas) ([]store.Write, error) {
					return change(p.i, r, d)
				})
				if err != nil {
					return err
				}
				rows[p.i] = n
			}
		case err != nil:
			return fmt.Errorf("update %d recipients: %w", len(batch), err)
		default:
			for _, p := range batch {
				rows[p.i] = p.next
			}
		}
		batch, total, writes = nil, deltas{}, 0
		return nil
	}
	for i := range rows {
		cur := rows[i]
		next := cur
		next.Clicks = slices.Clone(cur.Clicks)
		d := deltas{}
		extra, err := change(i, &next, d)
		if errors.Is(err, errNoChange) {
			continue
		}
		if err != nil {
			return err
		}
		d.move(bot, campaign, cur.State, next.State)
		next.rev = cur.rev + 1
		it, err := next.item(bot, campaign)
		if err != nil {
			return err
		}
		w := append([]store.Write{store.PutOp(it, store.RevisionIs(cur.rev))}, extra...)
		counters := len(total)
		for k := range d {
			if _, ok := total[k]; !ok {
				counters++
			}
		}
		if writes+len(w)+counters > store.MaxTransactWrites {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, pending{i: i, next: next, writes: w})
		writes += len(w)
		for k, n := range d {
			total[k] += n
		}
	}
	return flush()
}

// Recipients returns a page of a campaign's rows, all or in one state.
func (s *Service) Recipients(ctx context.Context, bot, id string, state RowState, limit int, cursor string) ([]Recipient, string, error) {
	if _, err := s.load(ctx, bot, id); err != nil {
		return nil, "", err
	}
	q := store.Query{PK: dataPK(bot, id), Prefix: rowPrefix, Limit: limit, Cursor: cursor}
	if state != "" {
		q = store.Query{Index: store.GSI1, PK: rowStatePK(bot, id, state), Limit: limit, Cursor: cursor}
	}
	page, err := s.d.Store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Recipient, 0, len(page.Items))
	for _, it := range page.Items {
		r, err := decodeRow(it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, r.Recipient)
	}
	return out, page.Next, nil
}
