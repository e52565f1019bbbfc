package reactions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/botplatform/api/shared/store"
)

// What the conversation runtime reads. For every incoming message it needs the triggers of
// the bot's published versions; reading every reaction each time would cost a query of up to
// 1000 items per message. Instead each bot has a publication counter, moved by every write
// that changes what is published (a publish, the deletion of a published reaction, an import
// that publishes), in the same transaction as that write. A process keeps the bot's list with
// the counter it was read at and reads the counter, one small item, per call: the list is
// read again only after a change, and never served stale once the change is committed.
//
// Versions are immutable, so a version once read is kept as long as there is room.

// publishedKey is the bot's publication counter (an atomic counter item: its Count).
func publishedKey(bot string) store.Key { return store.Key{PK: reactionsPK(bot), SK: "#PUBLISHED"} }

// bumpPublished is the write that moves the publication counter.
func bumpPublished(bot string) store.Write {
	return store.AddOp(publishedKey(bot), 1, time.Time{})
}

// Published is a reaction's newest published version as the runtime matches events against
// it: which reaction, which version, and that version's trigger.
type Published struct {
	ReactionID string
	Version    int64
	Trigger    Trigger
}

// Cache bounds: past them the cache starts over, which costs reads, never correctness.
const (
	maxCachedBots     = 1000
	maxCachedVersions = 5000
)

type publishedList struct {
	gen  int64
	list []Published
}

type versionKeyT struct {
	bot, id string
	n       int64
}

// publishedCache is per Service (so per process): the published lists by bot, stamped with
// the counter they were read at, and the versions read.
type publishedCache struct {
	mu       sync.Mutex
	bots     map[string]publishedList
	versions map[versionKeyT]Version
}

func newPublishedCache() *publishedCache {
	return &publishedCache{bots: map[string]publishedList{}, versions: map[versionKeyT]Version{}}
}

// Published returns every reaction of the bot that has a published version, oldest first
// (by id), with the trigger of that version. The slice is shared: callers must not modify it.
func (s *Service) Published(ctx context.Context, bot string) ([]Published, error) {
	// The counter is read before the list, so a list is never stamped with a counter newer
	// than what it reflects: at worst it is read again at the next call.
	gen, err := s.publishedGen(ctx, bot)
	if err != nil {
		return nil, err
	}
	s.cache.mu.Lock()
	cached, ok := s.cache.bots[bot]
	s.cache.mu.Unlock()
	if ok && cached.gen == gen {
		return cached.list, nil
	}
	list, err := s.readPublished(ctx, bot)
	if err != nil {
		return nil, err
	}
	s.cache.mu.Lock()
	if len(s.cache.bots) >= maxCachedBots {
		clear(s.cache.bots)
	}
	s.cache.bots[bot] = publishedList{gen: gen, list: list}
	s.cache.mu.Unlock()
	return list, nil
}

func (s *Service) publishedGen(ctx context.Context, bot string) (int64, error) {
	it, err := s.store.Get(ctx, publishedKey(bot))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reactions: read the publication counter: %w", err)
	}
	return it.Count, nil
}

// readPublished reads the bot's reactions. A reaction without unpublished changes has its
// published trigger in its draft; only the others cost a read of their version.
func (s *Service) readPublished(ctx context.Context, bot string) ([]Published, error) {
	all, err := s.all(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := []Published{}
	for _, rec := range all {
		if rec.PublishedVersion == nil {
			continue
		}
		p := Published{ReactionID: rec.ID, Version: *rec.PublishedVersion, Trigger: rec.Trigger}
		if rec.PublishedRevision != rec.Revision {
			v, err := s.cachedVersion(ctx, bot, rec.ID, p.Version)
			if err != nil {
				return nil, err
			}
			p.Trigger = v.Trigger
		}
		out = append(out, p)
	}
	return out, nil
}

// PublishedVersion returns version n of a reaction for running it: like Version (not found
// once the reaction is deleted), with the version itself served from the process's cache.
func (s *Service) PublishedVersion(ctx context.Context, bot, id string, n int64) (Version, error) {
	if _, err := s.get(ctx, bot, id); err != nil {
		return Version{}, err
	}
	return s.cachedVersion(ctx, bot, id, n)
}

func (s *Service) cachedVersion(ctx context.Context, bot, id string, n int64) (Version, error) {
	k := versionKeyT{bot: bot, id: id, n: n}
	s.cache.mu.Lock()
	v, ok := s.cache.versions[k]
	s.cache.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := s.version(ctx, bot, id, n)
	if err != nil {
		return Version{}, err
	}
	s.cache.mu.Lock()
	if len(s.cache.versions) >= maxCachedVersions {
		clear(s.cache.versions)
	}
	s.cache.versions[k] = v
	s.cache.mu.Unlock()
	return v, nil
}
