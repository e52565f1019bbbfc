package segments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// idPrefix prefixes segment ids.
const idPrefix = "seg"

// chunksPerTransaction bounds the member chunks written in one transaction: at most
// ChunkSize ids of MaxMemberIDBytes each, about 130 KB a chunk, so a transaction stays well
// under DynamoDB's 4 MB.
const chunksPerTransaction = 8

// check returns the problems of n, with field names as a client of the cohort routes
// would read them (name) or as the calling family's code would (source.*, members[i]).
func check(n *New) httpapi.Problems {
	var p httpapi.Problems
	switch l := utf8.RuneCountInString(n.Name); {
	case n.Name == "":
		p.Add("name", "is required")
	case l > MaxNameLen:
		p.Add("name", "is %d characters; at most %d", l, MaxNameLen)
	default:
		p.Text("name", n.Name, text.Name)
	}
	if n.Source.Kind != KindFunnelCohort && n.Source.Kind != KindExperimentCohort {
		p.Add("source.kind", "must be %s or %s", KindFunnelCohort, KindExperimentCohort)
	}
	if n.Source.ID == "" || len(n.Source.ID) > MaxSourceIDBytes {
		p.Add("source.id", "must be 1 to %d bytes", MaxSourceIDBytes)
	} else {
		p.Text("source.id", n.Source.ID, text.Line)
	}
	if n.Source.Revision < 1 {
		p.Add("source.revision", "must be 1 or more")
	}
	def := bytes.TrimSpace(n.Source.Definition)
	switch {
	case len(def) > MaxDefinitionBytes:
		p.Add("source.definition", "is %d bytes; at most %d", len(def), MaxDefinitionBytes)
	case len(def) == 0 || def[0] != '{' || !json.Valid(def):
		p.Add("source.definition", "must be a JSON object")
	}
	for i, m := range n.Members {
		if m == "" || len(m) > MaxMemberIDBytes {
			p.Add(fmt.Sprintf("members[%d]", i), "must be 1 to %d bytes", MaxMemberIDBytes)
		} else {
			p.Text(fmt.Sprintf("members[%d]", i), m, text.Line)
		}
		if len(p) >= 20 {
			break // the first problems say enough; a million would not fit a response
		}
	}
	return p
}

// errTooLarge is the 422 for a cohort of more than MaxMembers.
func errTooLarge(n int) error {
	return httpapi.Errorf(httpapi.KindUnprocessable, "cohort_too_large",
		"the cohort has %d members; a segment holds at most %d: narrow the range or the breakdown", n, MaxMembers).
		With("member_count", n).With("max_members", MaxMembers)
}

func (s *Service) save(ctx context.Context, bot string, n New) (Segment, error) {
	if len(n.Members) > 4*MaxMembers {
		// Refused before sorting: the caller's bound failed, and sorting millions is work.
		return Segment{}, errTooLarge(len(n.Members))
	}
	if err := check(&n).Err(); err != nil {
		return Segment{}, err
	}
	members := slices.Clone(n.Members)
	slices.Sort(members)
	members = slices.Compact(members)
	if len(members) > MaxMembers {
		return Segment{}, errTooLarge(len(members))
	}
	at := s.now()
	now := at.UTC().Truncate(time.Second)
	src := n.Source
	src.Definition = json.RawMessage(bytes.TrimSpace(src.Definition))
	// The id from the clock's full reading: segments saved within one second still list in
	// the order they were saved.
	seg := Segment{ID: ids.At(idPrefix, at), Name: n.Name, Source: src, MemberCount: int64(len(members)), ComputedAt: now}
	b, err := store.Encode(seg)
	if err != nil {
		return Segment{}, err
	}

	// The members first, the segment last: a segment that can be read has all its members.
	// A failure between leaves member chunks no segment names; Save erases them (best
	// effort) and the bot's purge erases whatever is left.
	chunks := 0
	for start := 0; start < len(members); start += ChunkSize * chunksPerTransaction {
		var writes []store.Write
		for c := start; c < len(members) && c < start+ChunkSize*chunksPerTransaction; c += ChunkSize {
			data, err := store.Encode(members[c:min(c+ChunkSize, len(members))])
			if err != nil {
				return Segment{}, err
			}
			writes = append(writes, store.PutOp(store.Item{Key: chunkKey(bot, seg.ID, chunks), Revision: 1, Data: data}, store.Always))
			chunks++
		}
		if err := s.store.Transact(ctx, writes); err != nil {
			s.eraseChunks(ctx, bot, seg.ID, chunks)
			return Segment{}, fmt.Errorf("save segment members: %w", err)
		}
	}
	err = store.Counted(ctx, s.store, countKey(bot), 1, func(c store.Counter) error {
		if c.Count >= MaxSegments {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot keeps at most %d segments; delete one first", MaxSegments).
				With("limit", MaxSegments)
		}
		return s.store.Transact(ctx, []store.Write{c.Write, store.PutOp(store.Item{Key: segmentKey(bot, seg.ID), Revision: 1, Data: b}, store.MustNotExist)})
	})
	if err != nil {
		s.eraseChunks(ctx, bot, seg.ID, chunks)
		return Segment{}, fmt.Errorf("save segment: %w", err)
	}
	return seg, nil
}

// eraseChunks deletes the first n member chunks of a segment; errors are left to the purge.
func (s *Service) eraseChunks(ctx context.Context, bot, id string, n int) {
	for start := 0; start < n; start += store.MaxTransactWrites {
		var writes []store.Write
		for c := start; c < n && c < start+store.MaxTransactWrites; c++ {
			writes = append(writes, store.DeleteOp(chunkKey(bot, id, c), store.Always))
		}
		if err := s.store.Transact(context.WithoutCancel(ctx), writes); err != nil {
			return
		}
	}
}

// load reads a stored segment; an id that cannot exist is not looked up.
func (s *Service) load(ctx context.Context, bot, id string) (Segment, error) {
	if !ids.Valid(idPrefix, id) {
		return Segment{}, httpapi.NotFound("segment")
	}
	it, err := s.store.Get(ctx, segmentKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Segment{}, httpapi.NotFound("segment")
	}
	if err != nil {
		return Segment{}, err
	}
	return store.Decode[Segment](it)
}

// sourceKey names a source in the lookups of one request.
type sourceKey struct{ kind, id string }

// withStale sets seg.Stale from its source's current revision; seen, when not nil, keeps
// the revisions looked up already (a list of segments of one funnel asks once).
func (s *Service) withStale(ctx context.Context, bot string, seg Segment, seen map[sourceKey]*int64) (Segment, error) {
	k := sourceKey{seg.Source.Kind, seg.Source.ID}
	rev, ok := seen[k]
	if !ok {
		lookup := s.sources[seg.Source.Kind]
		if lookup != nil {
			r, err := lookup(ctx, bot, seg.Source.ID)
			switch {
			case errors.Is(err, ErrSourceGone) || errors.Is(err, store.ErrNotFound) || httpapi.KindOf(err) == httpapi.KindNotFound:
			case err != nil:
				return Segment{}, fmt.Errorf("look up the revision of %s %s: %w", seg.Source.Kind, seg.Source.ID, err)
			default:
				rev = &r
			}
		}
		if seen != nil {
			seen[k] = rev
		}
	}
	seg.Stale = rev == nil || *rev != seg.Source.Revision
	return seg, nil
}

func (s *Service) list(ctx context.Context, bot string, limit int, cursor string) ([]Segment, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: segmentsPK(bot), Prefix: segmentPrefix, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	seen := map[sourceKey]*int64{}
	out := make([]Segment, 0, len(page.Items))
	for _, it := range page.Items {
		seg, err := store.Decode[Segment](it)
		if err != nil {
			return nil, "", err
		}
		if seg, err = s.withStale(ctx, bot, seg, seen); err != nil {
			return nil, "", err
		}
		out = append(out, seg)
	}
	return out, page.Next, nil
}

// memberCursor is the raw cursor of Members: the index of the next member. Lists seal it
// (httpapi.Cursors); families that call Members hand back what it returned.
func memberCursor(i int64) string { return "m" + strconv.FormatInt(i, 10) }

func parseMemberCursor(c string, count int64) (int64, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(c[min(1, len(c)):], 10, 64)
	if c[0] != 'm' || err != nil || n <= 0 || n >= count || memberCursor(n) != c {
		return 0, fmt.Errorf("%w: not a member cursor of this segment", store.ErrInvalidCursor)
	}
	return n, nil
}

func (s *Service) members(ctx context.Context, bot, id, cursor string, limit int) ([]string, string, error) {
	if limit < 1 || limit > store.MaxQueryLimit {
		return nil, "", fmt.Errorf("segments: members limit %d is outside 1..%d", limit, store.MaxQueryLimit)
	}
	seg, err := s.load(ctx, bot, id)
	if err != nil {
		return nil, "", err
	}
	from, err := parseMemberCursor(cursor, seg.MemberCount)
	if err != nil {
		return nil, "", err
	}
	out := make([]string, 0, min(int64(limit), seg.MemberCount-from))
	i := from
	for i < seg.MemberCount && len(out) < limit {
		chunk := int(i / ChunkSize)
		it, err := s.store.Get(ctx, chunkKey(bot, id, chunk))
		if err != nil {
			return nil, "", fmt.Errorf("read members of segment %s (chunk %d): %w", id, chunk, err)
		}
		ids, err := store.Decode[[]string](it)
		if err != nil {
			return nil, "", err
		}
		off := int(i % ChunkSize)
		if off >= len(ids) {
			return nil, "", fmt.Errorf("segment %s: chunk %d holds %d members, member %d expected", id, chunk, len(ids), i)
		}
		take := ids[off:min(len(ids), off+limit-len(out))]
		out = append(out, take...)
		i += int64(len(take))
	}
	next := ""
	if i < seg.MemberCount {
		next = memberCursor(i)
	}
	return out, next, nil
}

func (s *Service) delete(ctx context.Context, bot, id string) error {
	seg, err := s.load(ctx, bot, id)
	if err != nil {
		return err
	}
	err = store.Counted(ctx, s.store, countKey(bot), -1, func(c store.Counter) error {
		return s.store.Transact(ctx, []store.Write{c.Write, store.DeleteOp(segmentKey(bot, id), store.MustExist)})
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 1 {
		return httpapi.NotFound("segment") // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("delete segment: %w", err)
	}
	// Its members go after it: nothing can read them once the segment is gone, so a
	// failure here is not the client's; what is left is erased with the bot's purge.
	s.eraseChunks(ctx, bot, id, int((seg.MemberCount+ChunkSize-1)/ChunkSize))
	return nil
}
