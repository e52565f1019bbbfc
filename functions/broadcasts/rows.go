package broadcasts

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/botplatform/api/shared/store"
)

// RowState is where one recipient of a broadcast is. A row is in exactly one state, and the
// broadcast's counts are moved in the transaction that moves the row:
//
//	planned      to be sent
//	sending      claimed by a run of the send job, which is sending it now
//	sent         the provider took the message (message_id)
//	failed       the provider refused it for good (reason: blocked, outside_window,
//	             rejected); not retried. A subscriber who blocked the bot is also marked,
//	             and later broadcasts skip it until it writes to the bot again.
//	skipped      not sent, for reason (deleted, channel_changed, blocked)
//	interrupted  claimed by a run that never said how the send ended (a crash between claim
//	             and settle, or a send that got no answer): it may or may not have gone out,
//	             and is never sent again. A broadcast sends at most once to each recipient.
//	canceled     still planned when the broadcast was canceled
type RowState string

// The row states.
const (
	RowPlanned     RowState = "planned"
	RowSending     RowState = "sending"
	RowSent        RowState = "sent"
	RowFailed      RowState = "failed"
	RowSkipped     RowState = "skipped"
	RowInterrupted RowState = "interrupted"
	RowCanceled    RowState = "canceled"
)

// RowStates lists every row state.
func RowStates() []RowState {
	return []RowState{RowPlanned, RowSending, RowSent, RowFailed, RowSkipped, RowInterrupted, RowCanceled}
}

// Recipient is one subscriber's row in a broadcast.
type Recipient struct {
	ID           string   `json:"id"`
	SubscriberID string   `json:"subscriber_id"`
	Channel      string   `json:"channel"`
	State        RowState `json:"state"`
	// Reason says why a row was failed or skipped.
	Reason string `json:"reason,omitempty"`
	// MessageID is the provider's id of the message sent.
	MessageID string     `json:"message_id,omitempty"`
	PlannedAt time.Time  `json:"planned_at"`
	SentAt    *time.Time `json:"sent_at"`
	// DeliveredAt and ReadAt are when the provider said the message reached the person's
	// device and was read (WhatsApp's statuses; other channels report neither).
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	ReadAt      *time.Time `json:"read_at,omitempty"`
	// ClickedAt is the person's first click on one of the message's tracked link buttons.
	ClickedAt *time.Time `json:"clicked_at,omitempty"`
}

type row struct {
	Recipient
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	// Links are the targets of the message's tracked link buttons, by index: a click
	// redirects only to one of these, never to a URL taken from the request.
	Links []string `json:"links,omitempty"`
	rev   int64
}

func (r row) item(bot, id string) (store.Item, error) {
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:      rowKey(bot, id, r.ID),
		GSI1:     store.IndexKey{PK: rowStatePK(bot, id, r.State, r.Channel), SK: r.ID},
		Revision: r.rev,
		Data:     b,
	}, nil
}

func decodeRow(it store.Item) (row, error) {
	r, err := store.Decode[row](it)
	r.rev = it.Revision
	return r, err
}

// deltas are the counter moves of one transaction.
type deltas map[store.Key]int64

func (d deltas) add(bot, id, ch, name string, n int64) { d[counterKey(bot, id, ch, name)] += n }

// move counts a row of channel ch leaving from ("" for a new row) for to, with its reason.
func (d deltas) move(bot, id, ch string, from RowState, to RowState, reason string) {
	if from == to {
		return
	}
	if from != "" {
		d.add(bot, id, ch, "state#"+string(from), -1)
	}
	d.add(bot, id, ch, "state#"+string(to), 1)
	switch to {
	case RowFailed:
		d.add(bot, id, ch, "fail#"+reason, 1)
	case RowSkipped:
		d.add(bot, id, ch, "skip#"+reason, 1)
	}
}

// Engagement counts (delivered, read, clicked) are kept beside the state counts: a row that
// was delivered is still sent.
const engagedCounter = "engaged#"

// engage counts a row of channel ch as delivered, read or clicked: written with the row's
// change that sets its *At field, so each row counts once.
func engage(bot, id, ch, what string) store.Write {
	return store.AddOp(counterKey(bot, id, ch, engagedCounter+what), 1, time.Time{})
}

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

// errNoChange is what a row change returns to write nothing.
var errNoChange = errors.New("no change")

// change moves one row: it returns extra writes, errNoChange to leave the row.
type change func(i int, r *row) ([]store.Write, error)

// mutateRows applies ch to each row and writes the rows under their revisions, with the
// counter moves, in as few transactions as store.MaxTransactWrites allows; when a row of a
// transaction changed since it was read, that transaction's rows go one by one (mutateRow),
// so a row lost to another writer never costs the others their change. rows are updated.
func (s *Service) mutateRows(ctx context.Context, bot, id string, rows []row, ch change) error {
	type pending struct {
		i    int
		next row
	}
	var batch []pending
	var writes []store.Write
	d := deltas{}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.d.Store.Transact(ctx, append(writes, d.writes()...))
		switch {
		case errors.Is(err, store.ErrConditionFailed):
			for _, p := range batch {
				n, err := s.mutateRow(ctx, bot, id, &rows[p.i], func(r *row) ([]store.Write, error) { return ch(p.i, r) })
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
		batch, writes, d = nil, nil, deltas{}
		return nil
	}
	for i := range rows {
		next := rows[i]
		extra, err := ch(i, &next)
		if errors.Is(err, errNoChange) {
			continue
		}
		if err != nil {
			return err
		}
		nd := deltas{}
		nd.move(bot, id, next.Channel, rows[i].State, next.State, next.Reason)
		next.rev = rows[i].rev + 1
		it, err := next.item(bot, id)
		if err != nil {
			return err
		}
		w := append([]store.Write{store.PutOp(it, store.RevisionIs(rows[i].rev))}, extra...)
		// Each counter may appear at most once in a transaction: the moves are summed, so
		// room is kept for every counter the batch could touch.
		if len(writes)+len(w)+len(d)+len(nd) > store.MaxTransactWrites {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, pending{i: i, next: next})
		writes = append(writes, w...)
		for k, n := range nd {
			d[k] += n
		}
	}
	return flush()
}

const rowAttempts = 8

// mutateRow is mutateRows for one row, reading it again when another writer got there first.
func (s *Service) mutateRow(ctx context.Context, bot, id string, cur *row, ch func(r *row) ([]store.Write, error)) (row, error) {
	return mutateRow(ctx, s.d.Store, bot, id, cur, ch)
}

// mutateRow is Service.mutateRow on a store alone (the webhooks' delivery statuses and the
// click redirect need no more of the service).
func mutateRow(ctx context.Context, st store.Store, bot, id string, cur *row, ch func(r *row) ([]store.Write, error)) (row, error) {
	for range rowAttempts {
		if cur == nil {
			return row{}, errors.New("broadcasts: mutateRow without a row")
		}
		next := *cur
		extra, err := ch(&next)
		if errors.Is(err, errNoChange) {
			return next, nil
		}
		if err != nil {
			return row{}, err
		}
		d := deltas{}
		d.move(bot, id, next.Channel, cur.State, next.State, next.Reason)
		next.rev = cur.rev + 1
		it, err := next.item(bot, id)
		if err != nil {
			return row{}, err
		}
		writes := append([]store.Write{store.PutOp(it, store.RevisionIs(cur.rev))}, extra...)
		err = st.Transact(ctx, append(writes, d.writes()...))
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index == 0 {
			got, gerr := st.Get(ctx, rowKey(bot, id, cur.ID))
			if gerr != nil {
				return row{}, gerr
			}
			r, derr := decodeRow(got)
			if derr != nil {
				return row{}, derr
			}
			cur = &r
			continue
		}
		if err != nil {
			return row{}, fmt.Errorf("update recipient %s: %w", cur.ID, err)
		}
		return next, nil
	}
	return row{}, fmt.Errorf("recipient %s keeps changing: %w", cur.ID, store.ErrUnavailable)
}

// counter reads one count of a broadcast.
func (s *Service) counter(ctx context.Context, bot, id, ch, name string) (int64, error) {
	it, err := s.d.Store.Get(ctx, counterKey(bot, id, ch, name))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return it.Count, nil
}

// Recipients returns a page of a broadcast's rows (either generation).
func (s *Service) Recipients(ctx context.Context, bot, id string, limit int, cursor string) ([]Recipient, string, error) {
	if _, err := s.load(ctx, bot, id); err != nil {
		return nil, "", err
	}
	page, err := s.d.Store.Query(ctx, store.Query{PK: dataPK(bot, id), Prefix: rowPrefix, Limit: limit, Cursor: cursor})
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
