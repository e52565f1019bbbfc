package reactions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Service reads and writes a bot's reactions.
type Service struct {
	store store.Store
	vocab Vocabulary
	now   func() time.Time
	log   *slog.Logger
	// templates is the bot's template catalog (WithTemplates); nil checks no template.
	templates Templates
	// channels are the bot's connected channels (WithChannels); nil warns about none.
	channels Channels
	// cache keeps what the conversation runtime reads on every message (Published,
	// PublishedVersion) in this process.
	cache *publishedCache
	// events receives reaction_published (WithEvents); nil records none.
	events eventlog.Log
}

// WithEvents makes the service append a reaction_published event to the bot's event log
// for each version it publishes.
func (s *Service) WithEvents(l eventlog.Log) *Service { s.events = l; return s }

// NewService returns a Service. vocab resolves the labels and custom fields that steps name.
func NewService(st store.Store, vocab Vocabulary, now func() time.Time, log *slog.Logger) *Service {
	return &Service{store: st, vocab: vocab, now: now, log: log, cache: newPublishedCache()}
}

// writeAttempts bounds the retries of a write whose registry read was overtaken by another
// writer of the same bot.
const writeAttempts = 8

func busy() error {
	return fmt.Errorf("reactions: the bot's reactions keep changing: %w", store.ErrUnavailable)
}

func notFound() error { return httpapi.NotFound("reaction") }

func nameTaken(name, holder string) error {
	return httpapi.Errorf(httpapi.KindConflict, "name_taken", "a reaction named %q already exists; names are unique per bot, ignoring case", name).
		With("conflicting_id", holder)
}

func limitReached() error {
	return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot may have at most %d reactions; delete one first", MaxReactionsPerBot)
}

// conditionAt reports whether err is a failed condition of write i.
func conditionAt(err error, i int) bool {
	var ce *store.ConditionError
	return errors.As(err, &ce) && ce.Index == i
}

// commit writes one write as a plain conditional write and several as one transaction.
func (s *Service) commit(ctx context.Context, writes []store.Write) error {
	if len(writes) == 1 && writes[0].Put != nil {
		return s.store.Put(ctx, *writes[0].Put, writes[0].Cond)
	}
	return s.store.Transact(ctx, writes)
}

// world returns what u's references resolve against in the bot. The bot's labels and fields
// are read only when u names some.
func (s *Service) world(ctx context.Context, bot string, u uses) (world, error) {
	w := world{
		labels: map[string]bool{}, fields: map[string]FieldType{},
		labelWhere: "in this bot", fieldWhere: "in this bot", reactionWhere: "in this bot",
		reaction: func(id string) (bool, error) {
			if !ids.Valid("rct", id) {
				return false, nil
			}
			_, err := s.store.Get(ctx, reactionKey(bot, id))
			if errors.Is(err, store.ErrNotFound) {
				return false, nil
			}
			return err == nil, err
		},
	}
	if len(u.labels) > 0 {
		labels, err := s.vocab.Labels(ctx, bot)
		if err != nil {
			return w, fmt.Errorf("reactions: read labels: %w", err)
		}
		for _, l := range labels {
			w.labels[l.ID] = true
		}
	}
	if len(u.fields) > 0 {
		fields, err := s.vocab.Fields(ctx, bot)
		if err != nil {
			return w, fmt.Errorf("reactions: read fields: %w", err)
		}
		for _, f := range fields {
			w.fields[f.ID] = f.Type
		}
	}
	return w, nil
}

// validate normalizes c and checks it for the bot: its shape (400), then its flow against the
// bot's labels, fields and reactions (422). self is c's reaction id, "" before it has one.
func (s *Service) validate(ctx context.Context, bot string, c *Content, self string) (uses, error) {
	var r report
	u, err := s.check(ctx, bot, c, self, &r)
	if err != nil {
		return u, err
	}
	return u, r.err()
}

// check is validate without the verdict: it adds c's problems to r and returns an error
// only when the bot's vocabulary or reactions could not be read.
func (s *Service) check(ctx context.Context, bot string, c *Content, self string, r *report) (uses, error) {
	c.normalize()
	if c.Steps == nil {
		c.Steps = []Step{}
	}
	u := c.check(r, "", self)
	if len(r.shape) > 0 {
		return u, nil
	}
	w, err := s.world(ctx, bot, u)
	if err != nil {
		return u, err
	}
	return u, u.resolve(r, w)
}

// outgoing returns the sorted, distinct reactions u goes to, without self.
func outgoing(u uses, self string) []string {
	out := slices.DeleteFunc(u.reactionIDs(), func(id string) bool { return id == self })
	slices.Sort(out)
	return out
}

// union merges two sorted reference lists.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Create adds a reaction with content as its draft (revision 1, unpublished).
func (s *Service) Create(ctx context.Context, bot string, c Content) (Reaction, error) {
	for range writeAttempts {
		// The registry is read before the references are checked: a reaction deleted
		// meanwhile has moved the registry, and then this write fails and retries.
		reg, err := s.loadRegistry(ctx, bot)
		if err != nil {
			return Reaction{}, err
		}
		u, err := s.validate(ctx, bot, &c, "")
		if err != nil {
			return Reaction{}, err
		}
		if holder := reg.holder(c.Name); holder != "" {
			return Reaction{}, nameTaken(c.Name, holder)
		}
		if len(reg.Names) >= MaxReactionsPerBot {
			return Reaction{}, limitReached()
		}
		now := s.now().UTC()
		created := now.Truncate(time.Second) // API times are whole seconds; the id keeps the full clock
		rec := record{Reaction: Reaction{ID: ids.At("rct", now), Content: c, Revision: 1, CreatedAt: created, UpdatedAt: created}}
		rec.Refs = outgoing(u, rec.ID)
		reg.Names[nameKey(c.Name)] = rec.ID
		reg.move(nil, rec.Refs)
		regWrite, err := reg.write(bot)
		if err != nil {
			return Reaction{}, err
		}
		it, err := rec.item(bot)
		if err != nil {
			return Reaction{}, err
		}
		idx, err := indexPut(bot, rec.ID)
		if err != nil {
			return Reaction{}, err
		}
		err = s.store.Transact(ctx, []store.Write{regWrite, store.PutOp(it, store.MustNotExist), idx})
		if conditionAt(err, 0) {
			continue
		}
		if err != nil {
			return Reaction{}, fmt.Errorf("create reaction: %w", err)
		}
		return rec.view(), nil
	}
	return Reaction{}, busy()
}

// get reads a reaction's record. A malformed id is not found without a lookup.
func (s *Service) get(ctx context.Context, bot, id string) (record, error) {
	if !ids.Valid("rct", id) {
		return record{}, notFound()
	}
	it, err := s.store.Get(ctx, reactionKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, notFound()
	}
	if err != nil {
		return record{}, err
	}
	return store.Decode[record](it)
}

// Get returns a reaction's draft and publication state.
func (s *Service) Get(ctx context.Context, bot, id string) (Reaction, error) {
	rec, err := s.get(ctx, bot, id)
	if err != nil {
		return Reaction{}, err
	}
	return rec.view(), nil
}

// Filter narrows a list of reactions.
type Filter struct {
	// TriggerType keeps reactions whose draft has this trigger type ("" for all).
	TriggerType TriggerType
	// Published keeps reactions with (true) or without (false) a published version (nil for all).
	Published *bool
}

func (f Filter) keep(r Reaction) bool {
	if f.TriggerType != "" && r.Trigger.Type != f.TriggerType {
		return false
	}
	if f.Published != nil && (r.PublishedVersion != nil) != *f.Published {
		return false
	}
	return true
}

// listScanMax bounds the reactions one filtered page reads; a page may then be short (with a
// next cursor), as every list's may.
const listScanMax = 1000

// filterBatch is how many reactions a filtered list reads at a time.
const filterBatch = 100

// List returns one page of the bot's reactions that pass f, oldest first. The cursor is the
// id of the last reaction examined (the kernel seals it), so a filtered page can read in
// batches and still continue exactly after what it looked at.
func (s *Service) List(ctx context.Context, bot string, f Filter, limit int, cursor string) ([]Summary, string, error) {
	q := store.Query{PK: reactionsPK(bot), From: "rct_", To: "rct_~", Limit: limit}
	if cursor != "" {
		if !ids.Valid("rct", cursor) {
			return nil, "", store.ErrInvalidCursor
		}
		// From is inclusive. Ids all have one length, so every later id sorts after the
		// cursor with any character appended, and the cursor itself before it.
		q.From = cursor + "0"
	}
	filtered := f.TriggerType != "" || f.Published != nil
	if filtered {
		q.Limit = max(limit, filterBatch)
	}
	out := []Summary{}
	scanned := 0
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for i, it := range page.Items {
			rec, err := store.Decode[record](it)
			if err != nil {
				return nil, "", err
			}
			scanned++
			if v := rec.view(); f.keep(v) {
				out = append(out, v.Summary())
			}
			more := i < len(page.Items)-1 || page.Next != ""
			if len(out) == limit || scanned >= listScanMax {
				if !more {
					return out, "", nil
				}
				return out, rec.ID, nil
			}
		}
		if page.Next == "" {
			return out, "", nil
		}
		q.Cursor = page.Next
	}
}

// Patch is a change to a draft: each given part replaces the stored one as a whole.
type Patch struct {
	Name    *string
	Trigger *Trigger
	Steps   *[]Step
}

// sameContent compares contents as stored.
func sameContent(a, b Content) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// Update changes a reaction's draft if its revision is still expected. The revision is
// checked before the new draft is validated; a patch that changes nothing makes no revision.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, p Patch) (Reaction, error) {
	for range writeAttempts {
		reg, err := s.loadRegistry(ctx, bot)
		if err != nil {
			return Reaction{}, err
		}
		rec, err := s.get(ctx, bot, id)
		if err != nil {
			return Reaction{}, err
		}
		if rec.Revision != expected {
			return Reaction{}, httpapi.StaleRevision(rec.Revision)
		}
		c := rec.Content
		if p.Name != nil {
			c.Name = *p.Name
		}
		if p.Trigger != nil {
			c.Trigger = *p.Trigger
		}
		if p.Steps != nil {
			c.Steps = *p.Steps
		}
		u, err := s.validate(ctx, bot, &c, id)
		if err != nil {
			return Reaction{}, err
		}
		if sameContent(c, rec.Content) {
			return rec.view(), nil
		}
		var regChanged bool
		if oldKey, newKey := nameKey(rec.Name), nameKey(c.Name); oldKey != newKey {
			if holder := reg.Names[newKey]; holder != "" && holder != id {
				return Reaction{}, nameTaken(c.Name, holder)
			}
			if reg.Names[oldKey] == id {
				delete(reg.Names, oldKey)
			}
			reg.Names[newKey] = id
			regChanged = true
		}
		refs := union(rec.PublishedRefs, outgoing(u, id))
		if !slices.Equal(refs, rec.Refs) {
			reg.move(rec.Refs, refs)
			regChanged = true
		}
		rec.Content, rec.Refs = c, refs
		rec.Revision++
		rec.UpdatedAt = s.now().UTC().Truncate(time.Second)
		it, err := rec.item(bot)
		if err != nil {
			return Reaction{}, err
		}
		// The read above is advisory; this condition is what enforces expected_revision.
		writes := []store.Write{store.PutOp(it, store.RevisionIs(expected))}
		if regChanged {
			w, err := reg.write(bot)
			if err != nil {
				return Reaction{}, err
			}
			writes = append(writes, w)
		}
		err = s.commit(ctx, writes)
		switch {
		case conditionAt(err, 0):
			return Reaction{}, s.conflict(ctx, bot, id)
		case conditionAt(err, 1):
			continue
		case err != nil:
			return Reaction{}, fmt.Errorf("update reaction: %w", err)
		}
		return rec.view(), nil
	}
	return Reaction{}, busy()
}

// conflict explains a failed revision condition: the reaction is gone (404) or moved on (409).
func (s *Service) conflict(ctx context.Context, bot, id string) error {
	rec, err := s.get(ctx, bot, id)
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(rec.Revision)
}

// Publish is PublishWithWarnings for callers that show no warnings.
func (s *Service) Publish(ctx context.Context, bot, id string, expected int64) (Reaction, error) {
	rx, _, err := s.PublishWithWarnings(ctx, bot, id, expected)
	return rx, err
}

// PublishWithWarnings freezes the draft at revision expected as the reaction's next version,
// after validating it again against the bot as it is now, send_template steps against the
// bot's template catalog included (checkTemplates). Publishing a draft that is already the
// newest version changes nothing. The warnings are what publishing does not refuse but that
// will fail at run time as things stand (a template not approved yet), and the steps a
// connected channel cannot send as they are (its capabilities, per channel).
func (s *Service) PublishWithWarnings(ctx context.Context, bot, id string, expected int64) (Reaction, []Warning, error) {
	rx, templateWarnings, err := s.publish(ctx, bot, id, expected)
	if err != nil {
		return rx, nil, err
	}
	if rx.PublishedVersion != nil {
		n := *rx.PublishedVersion
		eventlog.Emit(ctx, s.events, s.log, fmt.Sprintf("reaction_published:%s:%s:%d", bot, id, n), eventlog.Event{
			BotID: bot, Name: eventlog.ReactionPublished, At: s.now(), Source: eventlog.SourceBuilder,
			Properties: map[string]any{"reaction_id": id, "version": float64(n)}})
	}
	warnings := make([]Warning, 0, len(templateWarnings))
	for _, w := range templateWarnings {
		warnings = append(warnings, Warning{Field: w.Field, Message: w.Message})
	}
	// Right after a publish the draft is the published version.
	cw, err := s.channelWarnings(ctx, bot, rx.Content)
	if err != nil {
		return rx, nil, err
	}
	return rx, append(warnings, cw...), nil
}

func (s *Service) publish(ctx context.Context, bot, id string, expected int64) (Reaction, []httpapi.FieldError, error) {
	for range writeAttempts {
		reg, err := s.loadRegistry(ctx, bot)
		if err != nil {
			return Reaction{}, nil, err
		}
		rec, err := s.get(ctx, bot, id)
		if err != nil {
			return Reaction{}, nil, err
		}
		if rec.Revision != expected {
			return Reaction{}, nil, httpapi.StaleRevision(rec.Revision)
		}
		if rec.PublishedVersion != nil && rec.PublishedRevision == rec.Revision {
			// Nothing to publish; the warnings still say how the published templates stand.
			var r report
			warnings, err := s.checkTemplates(ctx, bot, contentUses(rec.Content, id).templates, &r, false)
			if err != nil {
				return Reaction{}, nil, err
			}
			return rec.view(), warnings, nil
		}
		c := rec.Content
		var r report
		u, err := s.check(ctx, bot, &c, id, &r)
		if err != nil {
			return Reaction{}, nil, err
		}
		var warnings []httpapi.FieldError
		if len(r.shape) == 0 {
			if warnings, err = s.checkTemplates(ctx, bot, u.templates, &r, true); err != nil {
				return Reaction{}, nil, err
			}
		}
		if err := r.err(); err != nil {
			return Reaction{}, nil, err
		}
		if len(c.Steps) == 0 {
			return Reaction{}, nil, invalidSteps(httpapi.Problems{{Field: "steps", Message: "a reaction needs at least one step to be published"}})
		}
		n := int64(1)
		if rec.PublishedVersion != nil {
			n = *rec.PublishedVersion + 1
		}
		now := s.now().UTC().Truncate(time.Second)
		// The new version is the draft, so the draft's references are now all there is.
		refs := outgoing(u, id)
		regChanged := !slices.Equal(refs, rec.Refs)
		if regChanged {
			reg.move(rec.Refs, refs)
		}
		rec.Content = c
		rec.Revision++
		rec.PublishedVersion, rec.PublishedAt = &n, &now
		rec.PublishedRevision, rec.PublishedRefs, rec.Refs = rec.Revision, refs, refs
		rec.UpdatedAt = now
		it, err := rec.item(bot)
		if err != nil {
			return Reaction{}, nil, err
		}
		vit, err := versionItem(bot, Version{ReactionID: id, Version: n, Content: c, DraftRevision: expected, PublishedAt: now})
		if err != nil {
			return Reaction{}, nil, err
		}
		writes := []store.Write{store.PutOp(it, store.RevisionIs(expected)), store.PutOp(vit, store.MustNotExist)}
		if regChanged {
			w, err := reg.write(bot)
			if err != nil {
				return Reaction{}, nil, err
			}
			writes = append(writes, w)
		}
		// Last, so the indexes of the conditioned writes above stay as the switch reads them.
		writes = append(writes, bumpPublished(bot))
		err = s.store.Transact(ctx, writes)
		switch {
		case conditionAt(err, 0), conditionAt(err, 1):
			return Reaction{}, nil, s.conflict(ctx, bot, id)
		case conditionAt(err, 2):
			continue
		case err != nil:
			return Reaction{}, nil, fmt.Errorf("publish reaction: %w", err)
		}
		return rec.view(), warnings, nil
	}
	return Reaction{}, nil, busy()
}

// maxReferrersShown bounds the referenced_by list of a refused delete.
const maxReferrersShown = 20

// Delete removes a reaction and its versions. With expected set, only at that revision. A
// reaction that another reaction's draft or newest version goes to is not deleted (409
// reaction_in_use), so that no goto ever dangles.
func (s *Service) Delete(ctx context.Context, bot, id string, expected *int64) error {
	for range writeAttempts {
		reg, err := s.loadRegistry(ctx, bot)
		if err != nil {
			return err
		}
		rec, err := s.get(ctx, bot, id)
		if err != nil {
			return err
		}
		if expected != nil && rec.Revision != *expected {
			return httpapi.StaleRevision(rec.Revision)
		}
		if reg.Inbound[id] > 0 {
			by, err := s.referrers(ctx, bot, id)
			if err != nil {
				return err
			}
			return httpapi.Errorf(httpapi.KindConflict, "reaction_in_use",
				"%d other reaction(s) go to this reaction; remove those goto steps (and publish them) first", reg.Inbound[id]).
				With("referenced_by", by)
		}
		if reg.Names[nameKey(rec.Name)] == id {
			delete(reg.Names, nameKey(rec.Name))
		}
		reg.move(rec.Refs, nil)
		delete(reg.Inbound, id)
		w, err := reg.write(bot)
		if err != nil {
			return err
		}
		// The revision read is the condition even without expected: the registry update
		// above is computed from this revision's references.
		writes := []store.Write{w, store.DeleteOp(reactionKey(bot, id), store.RevisionIs(rec.Revision))}
		if rec.PublishedVersion != nil {
			writes = append(writes, bumpPublished(bot)) // its version no longer runs
		}
		// Until its versions are deleted, the tombstone is how they are found again (by
		// the purge of a deleted bot, when deleteVersions fails halfway).
		writes = append(writes, store.PutOp(store.Item{Key: goneKey(bot, id), Revision: 1}, store.Always),
			store.DeleteOp(indexKey(id), store.Always))
		err = s.store.Transact(ctx, writes)
		switch {
		case conditionAt(err, 0):
			continue
		case conditionAt(err, 1) && expected != nil:
			return s.conflict(ctx, bot, id)
		case conditionAt(err, 1):
			continue
		case err != nil:
			return fmt.Errorf("delete reaction: %w", err)
		}
		s.deleteVersions(ctx, bot, id)
		return nil
	}
	return busy()
}

// referrers lists (some of) the reactions that go to id.
func (s *Service) referrers(ctx context.Context, bot, id string) ([]string, error) {
	all, err := s.all(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, rec := range all {
		if slices.Contains(rec.Refs, id) {
			if out = append(out, rec.ID); len(out) == maxReferrersShown {
				break
			}
		}
	}
	return out, nil
}

// deleteVersions removes a deleted reaction's versions, then its tombstone. It runs after the
// reaction is gone and may fail halfway: what it leaves is unreachable (every version read
// starts from the reaction, and reaction ids are never reused), so a failure is logged, not
// returned; the tombstone stays, and the bot's purge finishes the work when the bot goes.
func (s *Service) deleteVersions(ctx context.Context, bot, id string) {
	ctx = context.WithoutCancel(ctx)
	for {
		page, err := s.store.Query(ctx, store.Query{PK: versionsPK(bot, id), Prefix: "V#", Limit: store.MaxTransactWrites})
		if err == nil && len(page.Items) > 0 {
			writes := make([]store.Write, 0, len(page.Items))
			for _, it := range page.Items {
				writes = append(writes, store.DeleteOp(it.Key, store.Always))
			}
			err = s.store.Transact(ctx, writes)
		}
		if err != nil {
			s.log.WarnContext(ctx, "deleting a deleted reaction's versions failed; they are unreachable", "reaction_id", id, "error", err)
			return
		}
		if len(page.Items) == 0 || page.Next == "" {
			if err := s.store.Delete(ctx, goneKey(bot, id), store.Always); err != nil {
				s.log.WarnContext(ctx, "deleting a deleted reaction's tombstone failed", "reaction_id", id, "error", err)
			}
			return
		}
	}
}

// Versions returns one page of a reaction's versions, newest first.
func (s *Service) Versions(ctx context.Context, bot, id string, limit int, cursor string) ([]VersionSummary, string, error) {
	if _, err := s.get(ctx, bot, id); err != nil {
		return nil, "", err
	}
	page, err := s.store.Query(ctx, store.Query{PK: versionsPK(bot, id), Prefix: "V#", Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]VersionSummary, 0, len(page.Items))
	for _, it := range page.Items {
		v, err := store.Decode[Version](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, v.Summary())
	}
	return out, page.Next, nil
}

// Version returns version n of a reaction.
func (s *Service) Version(ctx context.Context, bot, id string, n int64) (Version, error) {
	if _, err := s.get(ctx, bot, id); err != nil {
		return Version{}, err
	}
	return s.version(ctx, bot, id, n)
}

func (s *Service) version(ctx context.Context, bot, id string, n int64) (Version, error) {
	it, err := s.store.Get(ctx, versionKey(bot, id, n))
	if errors.Is(err, store.ErrNotFound) {
		return Version{}, httpapi.NotFound("version")
	}
	if err != nil {
		return Version{}, err
	}
	return store.Decode[Version](it)
}
