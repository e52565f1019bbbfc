package bots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// Service reads and writes bots.
type Service struct {
	store   store.Store
	auth    *auth.Service
	now     func() time.Time
	decoded *decodeCache
	// dependents are deleted in the bot's own deletion transaction (see WithDependents).
	dependents []Dependents
	// outbox stages the start of a deleted bot's purge in the deletion's transaction; log
	// reports a deletion that cannot start it.
	outbox outbox.Stager
	log    *slog.Logger
}

// Dependents returns what deleting bot must delete in the same transaction, because it must
// not outlive the bot for a moment (its channels, which would otherwise accept webhooks
// until the purge reaches them).
type Dependents func(ctx context.Context, bot string) ([]store.Write, error)

// WithDependents returns a copy of s whose Delete also deletes what d returns. The whole
// transaction must fit store.MaxTransactWrites: 1 + 51 for the bot and its most tokens and
// 1 for the purge's outbox item leave the rest for dependents, which must stay few (a bot
// has one channel per type: 4 writes each, 12 in all).
func (s *Service) WithDependents(d ...Dependents) *Service {
	c := *s
	c.dependents = append(slices.Clip(c.dependents), d...)
	return &c
}

// WithPurge returns a copy of s whose Delete starts the erasure of everything else the bot
// owns (job purge.Job, docs/purge.md): a first pass at once and a second one
// purge.SweepDelay later, whose start messages are staged in o within the deletion's own
// transaction, so that a deletion never commits without them. With a nil o (a tool that
// runs no jobs) the deletion is logged to log as not purged.
func (s *Service) WithPurge(o outbox.Stager, log *slog.Logger) *Service {
	c := *s
	c.outbox, c.log = o, log
	return &c
}

// NewService returns a Service. auth issues and revokes the bots' API tokens.
func NewService(s store.Store, a *auth.Service, now func() time.Time) *Service {
	return &Service{store: s, auth: a, now: now, decoded: &decodeCache{m: map[store.Key]cachedBot{}}}
}

// decodeCache remembers the decoded form of each bot's stored bytes. Every request under a
// bot reads the bot (the tenancy check), and decoding the same bytes again is pure waste. The
// store is still read every time and the cache only answers for identical bytes, so it can
// never serve a stale bot.
type decodeCache struct {
	mu sync.Mutex
	m  map[store.Key]cachedBot
}

type cachedBot struct {
	data []byte
	bot  Bot
}

const decodeCacheMax = 10000

func (c *decodeCache) decode(it store.Item) (Bot, error) {
	c.mu.Lock()
	e, ok := c.m[it.Key]
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.data, it.Data) {
		b, err := store.Decode[Bot](it)
		if err != nil {
			return Bot{}, err
		}
		e = cachedBot{data: it.Data, bot: b}
		c.mu.Lock()
		if len(c.m) >= decodeCacheMax {
			clear(c.m)
		}
		c.m[it.Key] = e
		c.mu.Unlock()
	}
	b := e.bot
	b.Settings.SupportedLocales = slices.Clone(b.Settings.SupportedLocales) // callers may modify their copy
	return b, nil
}

// A bot lives in its account's partition: a lookup with the caller's account can never
// find another account's bot.
func botKey(account, bot string) store.Key {
	return store.Key{PK: "ACCT#" + account, SK: "BOT#" + bot}
}

func botNotFound() error { return httpapi.NotFound("bot") }

// LoadBot implements httpapi.BotLoader: it returns the account's Bot.
func (s *Service) LoadBot(ctx context.Context, account, bot string) (any, error) {
	return s.Get(ctx, account, bot)
}

// Create adds a bot to the account with default settings overridden by settings.
func (s *Service) Create(ctx context.Context, account, name string, settings *SettingsPatch) (Bot, error) {
	var p httpapi.Problems
	name = checkName(&p, name)
	set := settings.apply(DefaultSettings())
	set.check(&p, "settings.")
	if err := p.Err(); err != nil {
		return Bot{}, err
	}
	now := s.now().UTC()
	created := now.Truncate(time.Second) // API timestamps are whole seconds; the id keeps the full clock
	b := Bot{ID: ids.At("bot", now), Name: name, Settings: set, Revision: 1, CreatedAt: created, UpdatedAt: created}
	data, err := store.Encode(b)
	if err != nil {
		return Bot{}, err
	}
	if err := s.store.Put(ctx, store.Item{Key: botKey(account, b.ID), Data: data, Revision: b.Revision}, store.MustNotExist); err != nil {
		return Bot{}, fmt.Errorf("create bot: %w", err)
	}
	return b, nil
}

// Get returns one bot of the account. A malformed id is not found without a lookup.
func (s *Service) Get(ctx context.Context, account, id string) (Bot, error) {
	if !ids.Valid("bot", id) {
		return Bot{}, botNotFound()
	}
	it, err := s.store.Get(ctx, botKey(account, id))
	if errors.Is(err, store.ErrNotFound) {
		return Bot{}, botNotFound()
	}
	if err != nil {
		return Bot{}, err
	}
	return s.decoded.decode(it)
}

// List returns one page of the account's bots, oldest first.
func (s *Service) List(ctx context.Context, account string, limit int, cursor string) ([]Bot, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: "ACCT#" + account, Prefix: "BOT#", Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Bot, 0, len(page.Items))
	for _, it := range page.Items {
		b, err := store.Decode[Bot](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, b)
	}
	return out, page.Next, nil
}

// Update changes a bot's name and settings if its revision is still expected.
func (s *Service) Update(ctx context.Context, account, id string, expected int64, name *string, settings *SettingsPatch) (Bot, error) {
	b, err := s.Get(ctx, account, id)
	if err != nil {
		return Bot{}, err
	}
	return s.update(ctx, account, b, expected, name, settings)
}

// update is Update starting from b, the bot as the caller has just read it (the handler
// passes the kernel's tenancy read): the write's revision condition, not the read, is what
// enforces expected, so a second read would only cost time.
func (s *Service) update(ctx context.Context, account string, b Bot, expected int64, name *string, settings *SettingsPatch) (Bot, error) {
	id := b.ID
	if b.Revision != expected {
		return Bot{}, httpapi.StaleRevision(b.Revision)
	}
	before := b
	var p httpapi.Problems
	if name != nil {
		b.Name = checkName(&p, *name)
	}
	b.Settings = settings.apply(b.Settings)
	b.Settings.check(&p, "settings.")
	if err := p.Err(); err != nil {
		return Bot{}, err
	}
	if b.Name == before.Name && reflect.DeepEqual(b.Settings, before.Settings) {
		return before, nil // nothing changes, so no new revision
	}
	b.Revision++
	b.UpdatedAt = s.now().UTC().Truncate(time.Second)
	data, err := store.Encode(b)
	if err != nil {
		return Bot{}, err
	}
	// The read above is advisory; this condition is what enforces expected_revision. The
	// route's audit event commits with it where the trail is in the store.
	err = httpapi.CommitAudited(ctx, s.store, http.StatusOK,
		store.PutOp(store.Item{Key: botKey(account, id), Data: data, Revision: b.Revision}, store.RevisionIs(expected)))
	if errors.Is(err, store.ErrConditionFailed) {
		return Bot{}, s.conflict(ctx, account, id)
	}
	if err != nil {
		return Bot{}, err
	}
	return b, nil
}

// conflict explains a failed revision condition: the bot is gone (404) or moved on (409).
func (s *Service) conflict(ctx context.Context, account, id string) error {
	cur, err := s.Get(ctx, account, id)
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(cur.Revision)
}

// Delete removes a bot and, in the same transaction, every API token of it and its
// dependents (WithDependents), and stages the start of the purge of the rest of the bot's
// data (WithPurge), which is sent once it has committed. With expected set, the bot is
// deleted only at that revision.
func (s *Service) Delete(ctx context.Context, account, id string, expected *int64) error {
	cond := store.MustExist
	if expected != nil {
		cond = store.RevisionIs(*expected)
	}
	// A token issued or revoked meanwhile fails the first token write (the token counter),
	// a dependent changed meanwhile fails its own condition: list them again, so that none
	// outlives the bot.
	for range deleteAttempts {
		tokenWrites, forget, err := s.auth.BotTokenDeletes(ctx, account, id)
		if err != nil {
			return err
		}
		writes := append([]store.Write{store.DeleteOp(botKey(account, id), cond)}, tokenWrites...)
		purgeWrites, startPurge, err := s.stagePurge(account, id)
		if err != nil {
			return fmt.Errorf("delete bot: %w", err)
		}
		writes = append(writes, purgeWrites...)
		for _, d := range s.dependents {
			ws, err := d(ctx, id)
			if err != nil {
				return fmt.Errorf("delete bot: %w", err)
			}
			writes = append(writes, ws...)
		}
		err = s.store.Transact(ctx, writes)
		var ce *store.ConditionError
		switch {
		case errors.As(err, &ce) && ce.Index == 0:
			return s.conflict(ctx, account, id)
		case errors.As(err, &ce):
			continue
		case err != nil:
			return fmt.Errorf("delete bot: %w", err)
		}
		forget()
		startPurge(ctx)
		return nil
	}
	return fmt.Errorf("delete bot: its tokens or dependents keep changing: %w", store.ErrUnavailable)
}

// stagePurge returns the writes that stage the start of the deleted bot's purge in the
// deletion's transaction, and the function that sends it once that transaction committed
// (which the outbox's sweep does in its stead if the process dies first or the queue
// refuses). Without an outbox the deletion is logged as not purged, with what an operator
// needs to start the purge by hand (docs/purge.md).
func (s *Service) stagePurge(account, bot string) ([]store.Write, func(context.Context), error) {
	p := purge.Payload{AccountID: account, BotID: bot}
	if s.outbox == nil {
		return nil, func(ctx context.Context) {
			s.logError(ctx, "deleted bot's data not purged: this process runs no jobs", p)
		}, nil
	}
	msgs, err := purge.StartMessages(p)
	if err != nil {
		return nil, nil, err
	}
	return s.outbox.Stage(msgs...)
}

func (s *Service) logError(ctx context.Context, msg string, p purge.Payload) {
	if s.log == nil {
		return
	}
	s.log.ErrorContext(ctx, msg, "job", purge.Job, "account_id", p.AccountID, "bot_id", p.BotID,
		"request_id", httpapi.RequestID(ctx))
}

// deleteAttempts bounds Delete's retries when tokens are issued or revoked concurrently.
const deleteAttempts = 8

// IssueToken mints an API token for the bot, written only while the bot still exists.
func (s *Service) IssueToken(ctx context.Context, account, bot, createdBy, name string) (auth.BotToken, string, error) {
	return s.auth.IssueBotToken(ctx, account, bot, createdBy, name, store.CheckOp(botKey(account, bot), store.MustExist))
}
