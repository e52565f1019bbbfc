package broadcasts

import (
	"context"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/store"
)

// WhatsApp's messaging tier bounds how many people a number may start conversations with in
// a rolling 24 hours; only a message outside a person's service window (a template) starts
// one. A bot's broadcasts count the templates they send in hour buckets:
//
//	BOT#<bot>#BCAST#WATIER   H#<2006010215>   templates sent that hour (expires after 25 h)
//
// Before each step the WhatsApp channel reads the number's tier (cached for tierTTL) and the
// last 24 buckets; with no room left it sends nothing that step, and the broadcast goes on
// once the window has slid past enough of them. The count is of messages, not people: a
// person who got two templates in a day counts twice, which errs on the side of Meta's limit.
// A template whose send got no answer (interrupted) counts too.
const tierTTL = 10 * time.Minute

func tierPK(bot string) string { return broadcastsPK(bot) + "#WATIER" }

func tierKey(bot string, at time.Time) store.Key {
	return store.Key{PK: tierPK(bot), SK: "H#" + at.UTC().Format("2006010215")}
}

// tierLimit is a bot's cached messaging limit.
type tierLimit struct {
	limit int
	at    time.Time
}

// tierBudget answers how many more templates the bot's WhatsApp number may send now, and
// whether it is bounded at all (the adapter reports no tier, or the tier is unlimited).
func (s *Service) tierBudget(ctx context.Context, bot string, a channel.Adapter, conn channel.Connection) (int64, bool, error) {
	lim, ok := a.(channel.MessagingLimiter)
	if !ok {
		return 0, false, nil
	}
	now := s.d.Now()
	limit := -1
	if v, ok := s.tiers.Load(bot); ok && now.Sub(v.(tierLimit).at) < tierTTL {
		limit = v.(tierLimit).limit
	} else {
		n, err := lim.MessagingLimit(ctx, conn)
		if err != nil {
			return 0, false, err
		}
		s.tiers.Store(bot, tierLimit{limit: n, at: now})
		limit = n
	}
	if limit == 0 {
		return 0, false, nil
	}
	// The 24 buckets of the window, this hour's included; From also keeps out buckets whose
	// expiry the store has not yet acted on.
	page, err := s.d.Store.Query(ctx, store.Query{PK: tierPK(bot), From: tierKey(bot, now.Add(-23*time.Hour)).SK, To: "H#~"})
	if err != nil {
		return 0, false, err
	}
	var used int64
	for _, it := range page.Items {
		used += it.Count
	}
	return max(0, int64(limit)-used), true, nil
}

// countTemplates adds n templates sent now to the bot's hour bucket.
func (s *Service) countTemplates(ctx context.Context, bot string, n int64) error {
	if n == 0 {
		return nil
	}
	now := s.d.Now()
	hour := now.UTC().Truncate(time.Hour)
	return s.d.Store.Transact(ctx, []store.Write{store.AddOp(tierKey(bot, now), n, hour.Add(25*time.Hour))})
}
