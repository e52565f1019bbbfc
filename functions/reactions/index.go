package reactions

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// The reaction index finds a reaction's bot from its id alone, for the routes that name a
// reaction without its bot (the copilot family's /api/reactions/{rootID}/...):
//
//	RCTIDX#<rct_id>  BOT   the reaction's bot ({"bot_id": ...})
//
// It is written in the transaction that creates the reaction and deleted in the one that
// deletes it; the bot's purge erases it with the reaction (a dependent partition). An
// import writes the index of the reactions it creates right after its transaction, which
// is full (MaxBundleReactions); a missing entry (that, or a reaction created before the
// index existed) is found again by BotOf's fallback, which writes it. The entry names a bot,
// not an account: BotOf checks that the bot is the caller's before it answers.
func indexPK(id string) string { return "RCTIDX#" + id }

func indexKey(id string) store.Key { return store.Key{PK: indexPK(id), SK: "BOT"} }

// indexEntry is the index item's data.
type indexEntry struct {
	BotID string `json:"bot_id"`
}

// indexPut is the write of id's index entry.
func indexPut(bot, id string) (store.Write, error) {
	data, err := store.Encode(indexEntry{BotID: bot})
	if err != nil {
		return store.Write{}, err
	}
	return store.PutOp(store.Item{Key: indexKey(id), Data: data, Revision: 1}, store.Always), nil
}

// AccountBots is what BotOf needs of the bots family: whether a bot is an account's, and
// the ids of an account's bots (the fallback for a reaction the index does not know).
type AccountBots interface {
	Owns(ctx context.Context, account, bot string) (bool, error)
	BotIDs(ctx context.Context, account string) ([]string, error)
}

// BotOf returns the bot of reaction id among account's bots: not found (404) for a
// malformed id, another account's reaction or one that does not exist. A reaction the index
// does not know is looked for in each of the account's bots, and the entry then written.
func (s *Service) BotOf(ctx context.Context, bots AccountBots, account, id string) (string, error) {
	if !ids.Valid("rct", id) {
		return "", notFound()
	}
	it, err := s.store.Get(ctx, indexKey(id))
	switch {
	case err == nil:
		e, err := store.Decode[indexEntry](it)
		if err != nil {
			return "", err
		}
		owns, err := bots.Owns(ctx, account, e.BotID)
		if err != nil {
			return "", err
		}
		if !owns {
			return "", notFound()
		}
		if _, err := s.get(ctx, e.BotID, id); err != nil {
			return "", err // deleted meanwhile
		}
		return e.BotID, nil
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	list, err := bots.BotIDs(ctx, account)
	if err != nil {
		return "", err
	}
	for _, bot := range list {
		_, err := s.store.Get(ctx, reactionKey(bot, id))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		w, err := indexPut(bot, id)
		if err != nil {
			return "", err
		}
		if err := s.store.Put(ctx, *w.Put, w.Cond); err != nil {
			// The answer stands; the next lookup scans again.
			s.log.WarnContext(ctx, "reactions: writing a reaction's index entry failed", "reaction_id", id, "error", err)
		}
		return bot, nil
	}
	return "", notFound()
}

// indexCreated writes the index entries of the reactions an import created, after its
// transaction: failures are logged, and BotOf's fallback finds those reactions.
func (s *Service) indexCreated(ctx context.Context, bot string, created []string) {
	ctx = context.WithoutCancel(ctx)
	for _, id := range created {
		w, err := indexPut(bot, id)
		if err == nil {
			err = s.store.Put(ctx, *w.Put, w.Cond)
		}
		if err != nil {
			s.log.WarnContext(ctx, "reactions: writing an imported reaction's index entry failed", "reaction_id", id, "error", err)
		}
	}
}

// CheckShape normalizes c and returns its shape problems: what a request body holding it
// would be refused for with 400 (unknown step types, missing members, bounds), before
// anything of the bot is read. self is c's reaction id.
func CheckShape(c *Content, self string) httpapi.Problems {
	c.normalize()
	if c.Steps == nil {
		c.Steps = []Step{}
	}
	var r report
	c.check(&r, "", self)
	return r.shape
}

// Problems returns what publishing c as reaction id's draft would be refused for, as
// POST .../publish reports it: the shape, the flow against the bot's labels, fields and
// reactions, send_template steps against the bot's template catalog, and at least one step.
// None means c would publish. c is normalized.
func (s *Service) Problems(ctx context.Context, bot, id string, c *Content) ([]httpapi.FieldError, error) {
	var r report
	u, err := s.check(ctx, bot, c, id, &r)
	if err != nil {
		return nil, err
	}
	if len(r.shape) > 0 {
		return slices.Clone(r.shape), nil
	}
	if _, err := s.checkTemplates(ctx, bot, u.templates, &r, true); err != nil {
		return nil, err
	}
	out := slices.Clone(r.flaws)
	slices.SortStableFunc(out, func(a, b httpapi.FieldError) int { return strings.Compare(sortKey(a.Field), sortKey(b.Field)) })
	if len(out) == 0 && len(c.Steps) == 0 {
		out = append(out, httpapi.FieldError{Field: "steps", Message: "a reaction needs at least one step to be published"})
	}
	return out, nil
}
