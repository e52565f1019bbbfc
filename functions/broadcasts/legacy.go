package broadcasts

import (
	"context"
	"fmt"
	"slices"

	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
)

// LegacyBroadcast is a legacy reaction broadcast as the shared GET shows it.
type LegacyBroadcast struct {
	ID         string     `json:"id"`
	Type       string     `json:"type"` // "reaction_broadcast"
	ReactionID string     `json:"reaction_id"`
	Paid       bool       `json:"paid"`
	Labels     []string   `json:"labels"`
	Status     Status     `json:"status"`
	Report     Report     `json:"report"`
	StartedAt  *time.Time `json:"started_at"`
	PausedAt   *time.Time `json:"paused_at"`
	FinishedAt *time.Time `json:"finished_at"`
	CreatedAt  time.Time  `json:"created_at"`
}

// LegacyRequest is the body of POST .../reactions/{reactionID}/broadcast.
type LegacyRequest struct {
	Paid   *bool    `json:"paid"`
	Labels []string `json:"labels"`
}

// Validate checks what decoding cannot.
func (r *LegacyRequest) Validate() error {
	var p httpapi.Problems
	if len(r.Labels) > MaxLabels {
		p.Add("labels", "at most %d labels", MaxLabels)
	}
	seen := map[string]bool{}
	for i, l := range r.Labels {
		f := fmt.Sprintf("labels[%d]", i)
		switch {
		case seen[l]:
			p.Add(f, "is listed twice")
		default:
			checkID(&p, f, l)
		}
		seen[l] = true
	}
	return p.Err()
}

// StartLegacy starts a legacy reaction broadcast: the reaction's published version runs for
// every subscriber having any of labels (every subscriber without labels), each once. The
// send job starts in the transaction that stores the broadcast.
func (s *Service) StartLegacy(ctx context.Context, bot, reactionID string, paid bool, labels []string) (LegacyBroadcast, error) {
	if s.d.Reactions == nil {
		return LegacyBroadcast{}, httpapi.E(httpapi.KindUnavailable, "broadcasts_unavailable", "this deployment cannot run reactions (no channels service or queue)")
	}
	published, err := s.d.Reactions.Published(ctx, bot, reactionID)
	if err != nil {
		return LegacyBroadcast{}, err
	}
	if !published {
		return LegacyBroadcast{}, httpapi.E(httpapi.KindConflict, "broadcast_not_ready", "the reaction cannot be broadcast yet: see reasons").
			With("reasons", []Problem{{Code: "unpublished_reaction", Message: fmt.Sprintf("reaction %s has no published version; publish it first", reactionID)}})
	}
	if missing, err := s.d.Audience.MissingLabels(ctx, bot, labels); err != nil {
		return LegacyBroadcast{}, err
	} else if len(missing) > 0 {
		var p httpapi.Problems
		for _, l := range missing {
			p.Add(fmt.Sprintf("labels[%d]", slices.Index(labels, l)), "the bot has no label %q", l)
		}
		return LegacyBroadcast{}, p.Unprocessable("unknown_label")
	}
	now := stamp(s.d.Now())
	if labels == nil {
		labels = []string{}
	}
	rec := record{Broadcast: Broadcast{ID: ids.At("lbc", now), Type: "reaction_broadcast", Status: Scheduled, Revision: 1,
		Channels: channel.Kinds(), SendAt: &now, ScheduledAt: &now, CreatedAt: now, UpdatedAt: now},
		Epoch: 1, Legacy: true, ReactionID: reactionID, Labels: slices.Clone(labels), Paid: paid, bot: bot}
	start, deliver, err := s.startJob(rec, 0)
	if err != nil {
		return LegacyBroadcast{}, err
	}
	// A legacy broadcast finishes by itself: it does not count toward MaxBroadcasts, which
	// bounds the drafts and launches a user keeps.
	it, err := rec.item()
	if err != nil {
		return LegacyBroadcast{}, err
	}
	if err := s.d.Store.Transact(ctx, append(start, putNew(it))); err != nil {
		return LegacyBroadcast{}, err
	}
	deliver(ctx)
	return s.legacyView(ctx, rec)
}

func (s *Service) legacyView(ctx context.Context, rec record) (LegacyBroadcast, error) {
	rep, err := s.report(ctx, rec)
	if err != nil {
		return LegacyBroadcast{}, err
	}
	return LegacyBroadcast{ID: rec.ID, Type: "reaction_broadcast", ReactionID: rec.ReactionID, Paid: rec.Paid, Labels: rec.Labels,
		Status: rec.Status, Report: rep, StartedAt: rec.StartedAt, PausedAt: rec.PausedAt, FinishedAt: rec.FinishedAt, CreatedAt: rec.CreatedAt}, nil
}

// Lookup returns the broadcast id names: a Broadcast (second generation, looked up first) or
// a LegacyBroadcast.
func (s *Service) Lookup(ctx context.Context, bot, id string) (any, error) {
	rec, err := s.lookup(ctx, bot, id)
	if err != nil {
		return nil, err
	}
	if rec.Legacy {
		return s.legacyView(ctx, rec)
	}
	return rec.Broadcast, nil
}

// ActLegacy runs pause, resume or cancel ("pause", "resume", "cancel") on the legacy reaction
// broadcast id names: the MCP tools act on legacy broadcasts only (spec 4.6). An id of a
// second-generation broadcast is refused, changing nothing, with 422
// unsupported_broadcast_type: it exists, so 404 would be wrong, and the refusal tells the
// caller where it is acted on (the REST route, under its expected_revision).
func (s *Service) ActLegacy(ctx context.Context, bot, id, action string) (LegacyStatus, error) {
	// Act reads the revision of a second-generation broadcast, and only of one, before it
	// changes anything: refusing there is refusing exactly the second generation.
	out, err := s.Act(ctx, bot, id, action, func() (int64, error) {
		return 0, httpapi.Errorf(httpapi.KindUnprocessable, "unsupported_broadcast_type",
			"%s is a second-generation broadcast; this acts on legacy reaction broadcasts only: %s it over REST with POST /api/bots/%s/broadcasts/%s/%s and its expected_revision",
			id, action, bot, id, action)
	})
	if err != nil {
		return LegacyStatus{}, err
	}
	st, ok := out.(LegacyStatus)
	if !ok {
		return LegacyStatus{}, fmt.Errorf("broadcasts: %s of legacy broadcast %s answered %T", action, id, out)
	}
	return st, nil
}
