package experiments

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// ExposureEvent is the event an assignment records in the bot's event log: the reports
// count a subscriber from their exposure on.
const ExposureEvent = eventlog.ExperimentExposure

// ExposureSource is the source of exposure events: the platform's, as docs/events.md
// lists experiment_exposure among the runtime's events (a customer cannot post the name).
const ExposureSource = eventlog.SourceRuntime

// Buckets is how finely assignment divides subscribers: a variant of weight w out of a
// total t gets about w/t of the buckets.
const Buckets = 10000

// bucket is where a subscriber falls in an experiment: the first 8 bytes of
// SHA-256(experiment id, salt, subscriber id), big-endian, mod Buckets. The parts are
// separated by a byte none of them holds, so that no two triples hash the same input.
func bucket(experiment, salt, subscriber string) int {
	h := sha256.New()
	h.Write([]byte(experiment))
	h.Write([]byte{0})
	h.Write([]byte(salt))
	h.Write([]byte{0})
	h.Write([]byte(subscriber))
	sum := h.Sum(nil)
	return int(binary.BigEndian.Uint64(sum[:8]) % Buckets)
}

// pick is the variant index a bucket falls into: variant i holds the buckets from
// Buckets·(w_0+…+w_{i-1})/total up to Buckets·(w_0+…+w_i)/total. Raising a weight moves
// only the boundaries next to it, so most subscribers keep their variant. A variant of
// weight 0 holds no bucket.
func pick(variants []Variant, b int) int {
	total := 0
	for _, v := range variants {
		total += v.Weight
	}
	cum := 0
	for i, v := range variants {
		cum += v.Weight
		if v.Weight > 0 && b < Buckets*cum/total {
			return i
		}
	}
	return len(variants) - 1 // unreachable: the last bound is Buckets
}

// Assign is the variant of the current version a subscriber sees.
func Assign(experiment string, d Definition, subscriber string) Variant {
	return d.Variants[pick(d.Variants, bucket(experiment, d.Salt, subscriber))]
}

// Assignment is the answer of an assignment.
type Assignment struct {
	ExperimentID string  `json:"experiment_id"`
	Version      int64   `json:"version"`
	SubscriberID string  `json:"subscriber_id"`
	VariantID    string  `json:"variant_id"`
	Subject      Subject `json:"subject"`
	// FirstExposure is true when this call recorded the subscriber's exposure to the
	// version, false when an earlier one had.
	FirstExposure bool `json:"first_exposure"`
}

// exposureID is the id of a subscriber's exposure to a version: derived from both, so that
// the event log records it once however often the subscriber is assigned.
func exposureID(experiment string, version int64, subscriber string) string {
	return "exposure_" + experiment + "_v" + strconv.FormatInt(version, 10) + "_" + subscriber
}

// Assign returns the variant a subscriber of the bot sees in a running experiment (409
// experiment_not_running otherwise; 404 for a subscriber the bot lacks) and records their
// exposure to the current version in the event log, once.
func (s *Service) Assign(ctx context.Context, bot, id, subscriber string) (Assignment, error) {
	e, err := s.load(ctx, bot, id)
	if err != nil {
		return Assignment{}, err
	}
	if e.Status != Running {
		return Assignment{}, httpapi.Errorf(httpapi.KindConflict, "experiment_not_running", "a %s experiment assigns no one; only a running one does", e.Status).
			With("state", e.Status)
	}
	channel, err := s.subscribers.Channel(ctx, bot, subscriber)
	if err != nil {
		return Assignment{}, err
	}
	v := Assign(e.ID, e.Definition, subscriber)
	n, err := s.events.Append(ctx, eventlog.Event{
		ID:           exposureID(e.ID, e.Version, subscriber),
		BotID:        bot,
		SubscriberID: subscriber,
		Name:         ExposureEvent,
		At:           s.now().UTC(),
		Channel:      channel,
		Source:       ExposureSource,
		Properties:   map[string]any{"experiment_id": e.ID, "variant_id": v.ID, "version": float64(e.Version)},
	})
	if err != nil {
		return Assignment{}, fmt.Errorf("record the exposure: %w", err)
	}
	return Assignment{ExperimentID: e.ID, Version: e.Version, SubscriberID: subscriber, VariantID: v.ID, Subject: v.Subject, FirstExposure: n == 1}, nil
}
