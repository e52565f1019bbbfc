package reactions

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// Storage layout. Everything lives under the bot ("BOT#<bot>#..."): the kernel has checked
// that the bot is the caller's before a handler runs, so keying by bot is tenant-safe.
//
//	BOT#<bot>#RCT          <rct_id>      a reaction: its draft and publication state (record)
//	BOT#<bot>#RCT          #REGISTRY     the bot's registry: names and inbound references
//	BOT#<bot>#RCT          #PUBLISHED    the bot's publication counter (published.go)
//	BOT#<bot>#RCT          #GONE#<rct_id> a deleted reaction whose versions are being deleted
//	BOT#<bot>#RCT#<rct_id> V#<0000000n>  version n of a reaction (Version)
//	RCTIDX#<rct_id>        BOT           the reaction's bot, found from its id alone (index.go)
func reactionsPK(bot string) string { return "BOT#" + bot + "#RCT" }

func reactionKey(bot, id string) store.Key { return store.Key{PK: reactionsPK(bot), SK: id} }

// goneKey is a deleted reaction's tombstone: it sorts before every reaction id, so lists of
// reactions (sort keys from "rct_") never see it.
func goneKey(bot, id string) store.Key { return store.Key{PK: reactionsPK(bot), SK: goneSKPrefix + id} }

const goneSKPrefix = "#GONE#"

func registryKey(bot string) store.Key { return store.Key{PK: reactionsPK(bot), SK: "#REGISTRY"} }

func versionsPK(bot, id string) string { return reactionsPK(bot) + "#" + id }

func versionKey(bot, id string, n int64) store.Key {
	return store.Key{PK: versionsPK(bot, id), SK: fmt.Sprintf("V#%010d", n)}
}

// record is a reaction as stored: the API view plus what the rules need.
type record struct {
	Reaction
	// PublishedRevision is the draft revision that the newest version froze; the draft has
	// unpublished changes when its revision differs.
	PublishedRevision int64 `json:"published_revision,omitempty"`
	// PublishedRefs are the reactions the newest version goes to: they count as referenced
	// until a later version drops them.
	PublishedRefs []string `json:"published_refs,omitempty"`
	// Refs are the other reactions the draft or the newest version goes to (sorted): what
	// this reaction counts for in the registry's Inbound.
	Refs []string `json:"refs,omitempty"`
}

// view returns the reaction as clients see it.
func (r record) view() Reaction {
	v := r.Reaction
	v.HasUnpublishedChanges = r.PublishedVersion == nil || r.PublishedRevision != r.Revision
	return v
}

func (r record) item(bot string) (store.Item, error) {
	data, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: reactionKey(bot, r.ID), Data: data, Revision: r.Revision}, nil
}

func versionItem(bot string, v Version) (store.Item, error) {
	data, err := store.Encode(v)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: versionKey(bot, v.ReactionID, v.Version), Data: data, Revision: 1}, nil
}

// registry is one item per bot that every change of the bot's set of reactions, of a name
// or of a reference between reactions writes under its revision. It makes three rules hold
// under concurrency: names are unique per bot, a bot has at most MaxReactionsPerBot
// reactions, and a reaction that another one goes to cannot be deleted (so a goto never
// dangles, and every export imports). Names are kept as hashes so that the item stays small
// (about 60 bytes a reaction) whatever the names' length.
type registry struct {
	// Names maps nameKey(name) to the reaction's id.
	Names map[string]string `json:"names"`
	// Inbound counts, per reaction, the other reactions whose draft or newest version goes to it.
	Inbound map[string]int `json:"inbound"`
	// rev is the item's revision (0: the item does not exist yet).
	rev int64
}

// nameKey identifies a name ignoring case.
func nameKey(name string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(name))))
	return base64.RawURLEncoding.EncodeToString(sum[:18])
}

func (s *Service) loadRegistry(ctx context.Context, bot string) (*registry, error) {
	it, err := s.store.Get(ctx, registryKey(bot))
	if errors.Is(err, store.ErrNotFound) {
		return &registry{Names: map[string]string{}, Inbound: map[string]int{}}, nil
	}
	if err != nil {
		return nil, err
	}
	reg, err := store.Decode[registry](it)
	if err != nil {
		return nil, err
	}
	if reg.Names == nil {
		reg.Names = map[string]string{}
	}
	if reg.Inbound == nil {
		reg.Inbound = map[string]int{}
	}
	reg.rev = it.Revision
	return &reg, nil
}

// holder returns the id of the reaction named name, or "".
func (g *registry) holder(name string) string { return g.Names[nameKey(name)] }

// move replaces one reaction's outgoing references from before to after.
func (g *registry) move(before, after []string) {
	for _, id := range before {
		if !slices.Contains(after, id) {
			if g.Inbound[id]--; g.Inbound[id] <= 0 {
				delete(g.Inbound, id)
			}
		}
	}
	for _, id := range after {
		if !slices.Contains(before, id) {
			g.Inbound[id]++
		}
	}
}

// write is the registry's conditional put: it fails when anyone changed it since it was read.
func (g *registry) write(bot string) (store.Write, error) {
	data, err := store.Encode(g)
	if err != nil {
		return store.Write{}, err
	}
	cond := store.RevisionOrAbsent(g.rev)
	return store.PutOp(store.Item{Key: registryKey(bot), Data: data, Revision: g.rev + 1}, cond), nil
}
