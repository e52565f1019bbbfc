package broadcasts

import (
	"context"
	"errors"
	"time"

	"github.com/botplatform/api/shared/store"
)

// DeliveryStatus is what a provider later says of a message it took.
type DeliveryStatus string

// The delivery statuses a broadcast's report counts (WhatsApp's message statuses; its "sent"
// says nothing the send's answer did not).
const (
	// Delivered: the message reached the person's device.
	Delivered DeliveryStatus = "delivered"
	// Read: the person opened it (WhatsApp reports it unless they turned read receipts off).
	Read DeliveryStatus = "read"
	// Undeliverable: the provider took the message and then could not deliver it; the row
	// moves from sent to failed with reason "undeliverable".
	Undeliverable DeliveryStatus = "undeliverable"
)

// Delivery is one status of one message, as the provider's webhook reports it.
type Delivery struct {
	// MessageID is the provider's id of the message (the id its send answered).
	MessageID string
	Status    DeliveryStatus
	At        time.Time
}

// RecordDeliveries applies a bot's WhatsApp delivery statuses to the broadcast rows their
// messages were sent for, and counts each row delivered and read at most once whatever the
// order and the repetitions of the provider's deliveries (read implies delivered). A status
// of a message no broadcast sent (a conversation's reply, or one whose send has not settled
// yet) is ignored. It needs only the store, so the webhooks family calls it directly.
func RecordDeliveries(ctx context.Context, st store.Store, bot string, ds []Delivery) error {
	for _, d := range ds {
		if d.MessageID == "" {
			continue
		}
		it, err := st.Get(ctx, waMsgKey(bot, d.MessageID))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		ref, err := store.Decode[waMessage](it)
		if err != nil {
			return err
		}
		got, err := st.Get(ctx, rowKey(bot, ref.Broadcast, ref.Recipient))
		if errors.Is(err, store.ErrNotFound) {
			continue // the broadcast was erased
		}
		if err != nil {
			return err
		}
		r, err := decodeRow(got)
		if err != nil {
			return err
		}
		at := stamp(d.At)
		if _, err := mutateRow(ctx, st, bot, ref.Broadcast, &r, func(n *row) ([]store.Write, error) {
			return n.deliver(bot, ref.Broadcast, d.Status, at)
		}); err != nil {
			return err
		}
	}
	return nil
}

// waMessage is the index item of a WhatsApp message a broadcast sent.
type waMessage struct {
	Broadcast string `json:"broadcast"`
	Recipient string `json:"recipient"`
}

// deliver applies one status to the row: errNoChange when it says nothing new.
func (n *row) deliver(bot, id string, s DeliveryStatus, at time.Time) ([]store.Write, error) {
	if n.State != RowSent {
		return nil, errNoChange
	}
	var w []store.Write
	switch s {
	case Delivered, Read:
		if n.DeliveredAt == nil {
			n.DeliveredAt = &at
			w = append(w, engage(bot, id, n.Channel, string(Delivered)))
		}
		if s == Read && n.ReadAt == nil {
			n.ReadAt = &at
			w = append(w, engage(bot, id, n.Channel, string(Read)))
		}
	case Undeliverable:
		if n.DeliveredAt != nil {
			return nil, errNoChange // a late failure of a message already delivered
		}
		n.State, n.Reason = RowFailed, "undeliverable"
		return nil, nil
	}
	if len(w) == 0 {
		return nil, errNoChange
	}
	return w, nil
}
