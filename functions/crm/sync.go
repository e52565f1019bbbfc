package crm

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/store"
)

// A subscriber's link to its CRM record: the record, and what both sides held after the last
// sync, by CRM field, in the CRM's representation (what a push writes, what the CRM
// answers). A sync writes only what differs from it, and a reconcile tells who changed a
// field by comparing each side with it.
type link struct {
	RecordID string `json:"record_id"`
	Object   string `json:"object"`
	// Synced are the fields' values at the last sync, by CRM field.
	Synced          map[string]any `json:"synced"`
	MappingRevision int64          `json:"mapping_revision"`
	SyncedAt        time.Time      `json:"synced_at"`
	// Conflicts are the CRM fields with an open conflict: no sync writes them until it is
	// resolved.
	Conflicts []string `json:"conflicts,omitempty"`
	// Deal is the deal the sync opened (or found open) for the record, as the CRM last
	// answered or a reconcile last read it.
	Deal *crmapi.Deal `json:"deal,omitempty"`
	// Error is the last sync's failure, cleared by a success.
	Error *RecordError `json:"error,omitempty"`
	rev   int64
}

// RecordError is why one subscriber's sync failed: a stable code and the provider's
// answer in the platform's words, never a credential.
type RecordError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// ProviderStatus and ProviderCode are the CRM's answer, when it answered.
	ProviderStatus int    `json:"provider_status,omitempty"`
	ProviderCode   string `json:"provider_code,omitempty"`
}

// The outcomes of one subscriber's sync.
const (
	OutcomeWritten   = "written"   // the record was created or updated
	OutcomeUnchanged = "unchanged" // the record already had every value: nothing was sent
	OutcomeSkipped   = "skipped"   // the subscriber has no value to match a record by
	OutcomeFailed    = "failed"    // the CRM refused the write (Error says why)
)

// syncer syncs subscribers with one connection's CRM under one mapping revision.
type syncer struct {
	s       *Service
	bot     string
	c       Connection
	m       Mapping
	cat     Catalog
	targets map[string]crmapi.Field
	cl      crmapi.Client
	// stages are the labels of the deal pipeline's stages by id (a mapping with a deal).
	stages map[string]string
}

// newSyncer reads what syncing with m needs: the bot's fields and labels, the CRM object's
// fields (the discovery cache) and the connection's client.
func (s *Service) newSyncer(ctx context.Context, bot string, c Connection, m Mapping) (*syncer, error) {
	if s.subscribers == nil {
		return nil, errNoSubscribers()
	}
	cat, err := s.subscribers.Catalog(ctx, bot)
	if err != nil {
		return nil, err
	}
	fs, err := s.fields(ctx, bot, c, m.Object, false)
	if err != nil {
		return nil, err
	}
	cl, err := s.clientOf(ctx, bot, c)
	if err != nil {
		return nil, err
	}
	y := &syncer{s: s, bot: bot, c: c, m: m, cat: cat, targets: make(map[string]crmapi.Field, len(fs.Data)), cl: cl}
	for _, f := range fs.Data {
		y.targets[f.Name] = f
	}
	if m.Deal != nil {
		ps, err := s.pipelines(ctx, bot, c, false)
		if err != nil {
			return nil, err
		}
		y.stages = map[string]string{}
		for _, p := range ps.Data {
			if p.ID == m.Deal.Pipeline {
				for _, st := range p.Stages {
					y.stages[st.ID] = st.Label
				}
			}
		}
	}
	return y, nil
}

// loadLink reads a subscriber's link; the zero link when it has none.
func (y *syncer) loadLink(ctx context.Context, sub string) (link, error) {
	it, err := y.s.store.Get(ctx, linkKey(y.bot, y.c.ID, sub))
	if errors.Is(err, store.ErrNotFound) {
		return link{}, nil
	}
	if err != nil {
		return link{}, err
	}
	l, err := store.Decode[link](it)
	l.rev = it.Revision
	return l, err
}

// saveLink writes l at its revision: a concurrent sync of the same subscriber makes it fail
// with store.ErrConditionFailed, and the caller decides.
func (y *syncer) saveLink(ctx context.Context, sub string, l link, extra ...store.Write) error {
	it, err := item(linkKey(y.bot, y.c.ID, sub), l.rev+1, l)
	if err != nil {
		return err
	}
	cond := store.RevisionOrAbsent(l.rev)
	return y.s.store.Transact(ctx, append([]store.Write{store.PutOp(it, cond)}, extra...))
}

// pushResult is one subscriber's push.
type pushResult struct {
	Outcome  string
	RecordID string
	// DealID is the record's deal (a mapping with a deal); DealOpened is true when the push
	// created it.
	DealID     string
	DealOpened bool
	Error      *RecordError
	// fatal is an error that ends the job (credentials refused): not the subscriber's.
	fatal error
}

// push writes the subscriber's mapped values to their record: only the fields whose value
// differs from what was last synced (none: no call at all), never a field with an open
// conflict. The record is matched by the mapping's key, so a repeated push (a resumed job)
// finds the record the first one created instead of creating another.
func (y *syncer) push(ctx context.Context, person Person) pushResult {
	key, ok := keyValue(person, y.cat, y.m.KeySource)
	if !ok {
		return pushResult{Outcome: OutcomeSkipped}
	}
	l, err := y.loadLink(ctx, person.ID)
	if err != nil {
		return pushResult{fatal: err}
	}
	// The key is written too: a record updated by its id follows a changed key value (a
	// subscriber's new email), and the next match by key finds it.
	props := map[string]any{y.m.Key: key}
	if y.targets[y.m.Key].Type == crmapi.TypeNumber {
		if n, err := strconv.ParseFloat(key, 64); err == nil {
			props[y.m.Key] = n
		}
	}
	for _, f := range y.m.Fields {
		if slices.Contains(l.Conflicts, f.Target) {
			continue
		}
		if v, reason := push(person, y.cat, f, y.targets); reason == "" {
			props[f.Target] = v
		}
	}
	if l.RecordID != "" && l.Object == y.m.Object {
		changed := false
		for k, v := range props {
			if old, ok := l.Synced[k]; !ok || !same(old, v) {
				changed = true
			}
		}
		if !changed {
			if y.needsDeal(l) {
				return y.openDeal(ctx, person, key, l, OutcomeUnchanged)
			}
			return pushResult{Outcome: OutcomeUnchanged, RecordID: l.RecordID, DealID: l.dealID()}
		}
	}
	var rec crmapi.Record
	if l.RecordID != "" && l.Object == y.m.Object {
		// The record the subscriber was last written to: by its id, one call and no search
		// (a search may lag behind at the provider, and the key value may have changed).
		err = retryCall(ctx, func() error {
			var err error
			rec, err = y.cl.Update(ctx, y.m.Object, l.RecordID, props)
			return err
		})
		if errors.Is(err, crmapi.ErrNotFound) {
			rec, err = y.upsert(ctx, key, props) // deleted or merged at the CRM: matched by key again
		}
	} else {
		rec, err = y.upsert(ctx, key, props)
	}
	if err != nil {
		if fatal(err) {
			return pushResult{fatal: err}
		}
		re := recordError(err)
		l.Error = re
		if err := y.saveLink(ctx, person.ID, l); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return pushResult{fatal: err}
		}
		return pushResult{Outcome: OutcomeFailed, Error: re}
	}
	var extra []store.Write
	if l.RecordID != rec.ID {
		ref, err := item(recordKey(y.bot, y.c.ID, rec.ID), 1, recordRef{SubscriberID: person.ID})
		if err != nil {
			return pushResult{fatal: err}
		}
		extra = append(extra, store.PutOp(ref, store.Always))
	}
	if l.Object != y.m.Object || l.Synced == nil {
		l.Synced = map[string]any{}
	}
	l.RecordID, l.Object, l.MappingRevision, l.SyncedAt, l.Error = rec.ID, y.m.Object, y.m.Revision, stamp(y.s.now()), nil
	for k, v := range props {
		l.Synced[k] = v
	}
	if err := y.saveLink(ctx, person.ID, l, extra...); err != nil {
		if !errors.Is(err, store.ErrConditionFailed) {
			// The record is written; a lost link only costs the next sync a write.
			return pushResult{fatal: err}
		}
		return pushResult{Outcome: OutcomeWritten, RecordID: rec.ID, DealID: l.dealID()}
	}
	l.rev++
	if y.needsDeal(l) {
		return y.openDeal(ctx, person, key, l, OutcomeWritten)
	}
	return pushResult{Outcome: OutcomeWritten, RecordID: rec.ID, DealID: l.dealID()}
}

// dealID is the id of the link's deal, "" when it has none.
func (l link) dealID() string {
	if l.Deal == nil {
		return ""
	}
	return l.Deal.ID
}

// recordRef is a record's subscriber.
type recordRef struct {
	SubscriberID string `json:"subscriber_id"`
}

// maxRateWait bounds how long one call waits for a provider's rate limit to pass before the
// job gives up the step (the next step waits the rest).
const maxRateWait = 30 * time.Second

// upsert writes props to the subscriber's record, waiting out the provider's rate limit and
// retrying a temporary failure a few times.
func (y *syncer) upsert(ctx context.Context, key string, props map[string]any) (crmapi.Record, error) {
	var rec crmapi.Record
	err := retryCall(ctx, func() error {
		var err error
		rec, err = y.cl.Upsert(ctx, y.m.Object, y.m.Key, key, props)
		return err
	})
	return rec, err
}

// retryCall runs call until it succeeds, fails for good, or has been tried 4 times: a rate
// limit is waited out (up to maxRateWait), a temporary failure retried after a short pause.
func retryCall(ctx context.Context, call func() error) error {
	var err error
	for attempt := range 4 {
		if err = call(); err == nil {
			return nil
		}
		var rl *crmapi.RateLimitedError
		var pe *crmapi.ProviderError
		var wait time.Duration
		switch {
		case errors.As(err, &rl) && rl.RetryAfter <= maxRateWait:
			wait = max(rl.RetryAfter, 100*time.Millisecond)
		case errors.As(err, &pe) && pe.Temporary:
			wait = time.Duration(attempt+1) * 250 * time.Millisecond
		default:
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return err
}

// fatal reports an error that no other subscriber's sync would escape: the credentials
// refused, the CRM's permission missing, the rate limit not passing, the CRM unreachable.
func fatal(err error) bool {
	var rl *crmapi.RateLimitedError
	var pe *crmapi.ProviderError
	switch {
	case errors.Is(err, crmapi.ErrUnauthorized), errors.Is(err, crmapi.ErrForbidden), errors.As(err, &rl):
		return true
	case errors.As(err, &pe):
		return pe.Temporary
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}

// recordError describes a refusal of one record's write.
func recordError(err error) *RecordError {
	var pe *crmapi.ProviderError
	if errors.As(err, &pe) {
		return &RecordError{Code: "crm_request_rejected", Message: "the CRM refused the record (HTTP " + strconv.Itoa(pe.Status) + ")",
			ProviderStatus: pe.Status, ProviderCode: safeCode(pe.Code)}
	}
	if errors.Is(err, crmapi.ErrNotFound) {
		return &RecordError{Code: "crm_object_missing", Message: "the CRM no longer has the mapped object or record"}
	}
	return &RecordError{Code: "sync_failed", Message: "the record could not be written"}
}

// The outcomes of a CRM record a reconcile reads.
const (
	pullUnchanged = iota // neither side changed a mapped field
	pullWritten          // the subscriber took the CRM's values
	pullConflict         // both changed a field: a conflict is open
	pullUnlinked         // the record is no subscriber's
)

// pull takes a changed CRM record's values: a field the CRM changed since the last sync is
// written to the subscriber when the platform did not change it too (or the field is
// pull-only); when both changed it to different values, a conflict is opened and neither
// side is written until it is resolved. It returns how many conflicts it opened.
func (y *syncer) pull(ctx context.Context, rec crmapi.Record) (outcome, opened int, err error) {
	ref, err := y.s.store.Get(ctx, recordKey(y.bot, y.c.ID, rec.ID))
	if errors.Is(err, store.ErrNotFound) {
		return pullUnlinked, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	r, err := store.Decode[recordRef](ref)
	if err != nil {
		return 0, 0, err
	}
	person, err := y.s.subscribers.Subscriber(ctx, y.bot, r.SubscriberID)
	if isNotFound(err) {
		return pullUnlinked, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	l, err := y.loadLink(ctx, person.ID)
	if err != nil || l.RecordID != rec.ID {
		return pullUnlinked, 0, err
	}
	if l.Synced == nil {
		l.Synced = map[string]any{}
	}
	var w Write
	var conflicts []Conflict
	changed := false
	for _, f := range y.m.Fields {
		if f.Direction == DirectionPush || slices.Contains(l.Conflicts, f.Target) {
			continue
		}
		crmValue, ok := rec.Properties[f.Target]
		if !ok {
			continue
		}
		base, known := l.Synced[f.Target]
		if known && same(base, crmValue) {
			continue // the CRM did not change it
		}
		var platform any
		if f.Direction == DirectionBoth {
			platform, _ = push(person, y.cat, f, y.targets)
		}
		switch {
		case f.Direction == DirectionBoth && same(platform, crmValue):
			// Both sides hold the same value already.
		case f.Direction == DirectionBoth && (!known || !same(platform, base)) && platform != nil:
			if len(conflicts) == maxConflictsPerRecord {
				continue // the rest wait for the next reconcile that reads the record
			}
			conflicts = append(conflicts, y.newConflict(person.ID, rec.ID, f, platform, crmValue, base, known))
			l.Conflicts = append(l.Conflicts, f.Target)
			changed = true
			continue
		default:
			if !pullInto(&w, y.cat, f, crmValue) {
				continue // a value the subscriber's field cannot hold: left as it is
			}
		}
		l.Synced[f.Target] = crmValue
		changed = true
	}
	if !changed {
		return pullUnchanged, 0, nil
	}
	if !w.Empty() {
		if err := y.s.subscribers.Write(ctx, y.bot, person.ID, w); err != nil {
			return 0, 0, err
		}
	}
	writes, err := y.conflictWrites(conflicts)
	if err != nil {
		return 0, 0, err
	}
	l.SyncedAt = stamp(y.s.now())
	if err := y.saveLink(ctx, person.ID, l, writes...); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			// Another sync of the subscriber (or an open conflict of the field) came first:
			// the next reconcile reads the record again.
			return pullUnchanged, 0, nil
		}
		return 0, 0, err
	}
	if len(conflicts) > 0 {
		return pullConflict, len(conflicts), nil
	}
	return pullWritten, 0, nil
}

// maxConflictsPerRecord bounds the conflicts one record opens at once: each is two writes
// of the transaction that saves the subscriber's link.
const maxConflictsPerRecord = (store.MaxTransactWrites - 1) / 2

// pullInto adds to w what writing a CRM value to f's source takes; false when the value does
// not convert to the source's type.
func pullInto(w *Write, cat Catalog, f MappingField, v any) bool {
	src, _ := parseSource(f.Source)
	text := asText(v)
	for from, to := range f.Values {
		if to == text {
			text = from
			break
		}
	}
	switch src.kind {
	case "label":
		on, err := strconv.ParseBool(text)
		if err != nil && text != "" {
			return false
		}
		if w.Labels == nil {
			w.Labels = map[string]bool{}
		}
		w.Labels[src.name] = on
		return true
	case "field":
		val, ok := convertPulled(cat.Fields[src.name], v, text)
		if !ok {
			return false
		}
		if w.Fields == nil {
			w.Fields = map[string]any{}
		}
		w.Fields[src.name] = val
		return true
	}
	if b, ok := builtins[src.name]; !ok || !b.writable {
		return false
	}
	if src.name == "email" {
		if w.Fields == nil {
			w.Fields = map[string]any{}
		}
		w.Fields["email"] = nilIfEmpty(text)
		return true
	}
	if w.Attributes == nil {
		w.Attributes = map[string]string{}
	}
	w.Attributes[src.name] = text
	return true
}

// convertPulled converts a CRM value (and its text, after the mapping's translations) to a
// custom field of type typ; nil clears the field.
func convertPulled(typ string, v any, text string) (any, bool) {
	if v == nil || text == "" {
		return nil, true
	}
	switch typ {
	case SubscriberString:
		return text, true
	case SubscriberNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		return f, err == nil
	case SubscriberBoolean:
		b, err := strconv.ParseBool(text)
		return b, err == nil
	case SubscriberDatetime:
		if t, err := time.Parse(time.RFC3339, text); err == nil {
			return t.UTC().Format(time.RFC3339), true
		}
		if t, err := time.Parse(time.DateOnly, text); err == nil {
			return t.UTC().Format(time.RFC3339), true
		}
	}
	return nil, false
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
