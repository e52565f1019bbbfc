package purge

import (
	"encoding/json"
	"errors"
	"fmt"
)

// EraseJob is the job kind that erases what the families keep about one erased subscriber
// beyond the subscriber's own items, which the erasure itself deleted (docs/subscribers.md,
// "Erasure"): the subscriber's events, an email campaign's copy of their address. The
// subscribers family stages it in the erasure's transaction; the platform registers it,
// running every family's Erase step in turn (shared/family).
const EraseJob = "subscribers.erase"

// Erasure names the erased subscriber. It is the payload of EraseJob and of every family's
// Erase step.
type Erasure struct {
	BotID        string `json:"bot_id"`
	SubscriberID string `json:"subscriber_id"`
}

// DecodeErasure reads an erase step's payload. Both ids are required: a key built from an
// empty one could name every subscriber's items.
func DecodeErasure(raw json.RawMessage) (Erasure, error) {
	var e Erasure
	if err := json.Unmarshal(raw, &e); err != nil {
		return Erasure{}, fmt.Errorf("erase: payload: %w", err)
	}
	if e.BotID == "" || e.SubscriberID == "" {
		return Erasure{}, errors.New("erase: payload needs bot_id and subscriber_id")
	}
	return e, nil
}
