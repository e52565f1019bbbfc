package crm

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// The states of a conflict.
const (
	ConflictOpen     = "open"
	ConflictResolved = "resolved"
)

// How a conflict is resolved.
const (
	ChoosePlatform = "platform" // the subscriber's value is written to the CRM
	ChooseCRM      = "crm"      // the CRM's value is written to the subscriber
	ChooseValue    = "value"    // a value given in the resolution is written to both
)

// Conflict is a field both sides changed to different values since their last sync. While
// it is open, no sync writes the field either way.
type Conflict struct {
	ID           string `json:"id"`
	ConnectionID string `json:"connection_id"`
	SubscriberID string `json:"subscriber_id"`
	RecordID     string `json:"record_id"`
	Object       string `json:"object"`
	// Source is the subscriber value mapped, Target the CRM field.
	Source string `json:"source"`
	Target string `json:"target"`
	// PlatformValue and CRMValue are both sides' values when the conflict was found, in the
	// CRM's representation; BaseValue what they last agreed on (absent: never synced).
	PlatformValue any    `json:"platform_value"`
	CRMValue      any    `json:"crm_value"`
	BaseValue     any    `json:"base_value,omitempty"`
	Status        string `json:"status"`
	// Resolution is how it was resolved, ResolvedValue the value both sides now hold.
	Resolution    string     `json:"resolution,omitempty"`
	ResolvedValue any        `json:"resolved_value,omitempty"`
	ResolvedAt    *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy    string     `json:"resolved_by,omitempty"`
	Revision      int64      `json:"revision"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

func (y *syncer) newConflict(sub, recordID string, f MappingField, platform, crmValue, base any, known bool) Conflict {
	now := stamp(y.s.now())
	c := Conflict{ID: ids.New("cfl"), ConnectionID: y.c.ID, SubscriberID: sub, RecordID: recordID, Object: y.m.Object,
		Source: f.Source, Target: f.Target, PlatformValue: platform, CRMValue: crmValue, Status: ConflictOpen,
		Revision: 1, CreatedAt: now, UpdatedAt: now}
	if known {
		c.BaseValue = base
	}
	return c
}

// conflictWrites are the writes that open cs: each with the marker of its subscriber's
// field, which must not exist (one open conflict per field).
func (y *syncer) conflictWrites(cs []Conflict) ([]store.Write, error) {
	var out []store.Write
	for _, c := range cs {
		it, err := item(conflictKey(y.bot, y.c.ID, c.ID), 1, c)
		if err != nil {
			return nil, err
		}
		marker, err := item(openConflictKey(y.bot, y.c.ID, c.SubscriberID, c.Target), 1, map[string]string{"conflict_id": c.ID})
		if err != nil {
			return nil, err
		}
		out = append(out, store.PutOp(it, store.MustNotExist), store.PutOp(marker, store.MustNotExist))
	}
	return out, nil
}

func (s *Service) loadConflict(ctx context.Context, bot, conn, id string) (Conflict, error) {
	if !ids.Valid("cfl", id) {
		return Conflict{}, httpapi.NotFound("conflict")
	}
	it, err := s.store.Get(ctx, conflictKey(bot, conn, id))
	if errors.Is(err, store.ErrNotFound) {
		return Conflict{}, httpapi.NotFound("conflict")
	}
	if err != nil {
		return Conflict{}, err
	}
	c, err := store.Decode[Conflict](it)
	c.Revision = it.Revision
	return c, err
}

// Conflicts lists a connection's conflicts, oldest first; status narrows them (open,
// resolved; "" for all).
func (s *Service) Conflicts(ctx context.Context, bot, conn, status string, limit int, cursor string) ([]Conflict, string, error) {
	if _, err := s.load(ctx, bot, conn); err != nil {
		return nil, "", err
	}
	if status != "" && status != ConflictOpen && status != ConflictResolved {
		return nil, "", httpapi.InvalidParam("status", "must be open or resolved")
	}
	out := []Conflict{}
	// A status filter is applied to the items read: a page may come back short, with a
	// cursor (as DynamoDB's filters do), and its cost stays bounded.
	page, err := s.store.Query(ctx, store.Query{PK: syncPK(bot, conn), Prefix: conflictPrefix, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	for _, it := range page.Items {
		c, err := store.Decode[Conflict](it)
		if err != nil {
			return nil, "", err
		}
		c.Revision = it.Revision
		if status == "" || c.Status == status {
			out = append(out, c)
		}
	}
	return out, page.Next, nil
}

// Conflict returns one conflict of a connection.
func (s *Service) Conflict(ctx context.Context, bot, conn, id string) (Conflict, error) {
	if _, err := s.load(ctx, bot, conn); err != nil {
		return Conflict{}, err
	}
	return s.loadConflict(ctx, bot, conn, id)
}

// ResolveRequest is the body of POST .../conflicts/{conflictID}/resolve.
type ResolveRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
	// Choose is platform, crm or value; Value is the value for value (in the CRM's
	// representation: text, a number or a boolean; null clears the field).
	Choose string `json:"choose"`
	Value  any    `json:"value"`
}

// Validate checks the request's form.
func (r *ResolveRequest) Validate() error {
	var p httpapi.Problems
	if r.ExpectedRevision == nil {
		p.Add("expected_revision", "is required: the revision of the conflict you decided on")
	}
	switch r.Choose {
	case ChoosePlatform, ChooseCRM:
		if r.Value != nil {
			p.Add("value", "is only given with choose=value")
		}
	case ChooseValue:
		switch v := r.Value.(type) {
		case nil, bool, float64:
		case string:
			if len(v) > maxValueLen {
				p.Add("value", "must be at most %d bytes", maxValueLen)
			}
		default:
			p.Add("value", "must be text, a number, a boolean or null")
		}
	default:
		p.Add("choose", "must be platform, crm or value")
	}
	return p.Err()
}

// maxValueLen bounds a resolution's value: CRM text fields hold far less (HubSpot 65,536
// characters, Salesforce long text 131,072 bytes; single-line text 255).
const maxValueLen = 65536

// Resolve resolves an open conflict at its revision: the chosen value is written to the
// side that does not hold it (the CRM record, the subscriber, or both for a given value),
// becomes what both sides agree on, and the field syncs again.
func (s *Service) Resolve(ctx context.Context, caller *auth.Principal, bot, conn, id string, req ResolveRequest) (Conflict, error) {
	c, err := s.load(ctx, bot, conn)
	if err != nil {
		return Conflict{}, err
	}
	cf, err := s.loadConflict(ctx, bot, conn, id)
	if err != nil {
		return Conflict{}, err
	}
	if cf.Revision != *req.ExpectedRevision {
		return Conflict{}, httpapi.StaleRevision(cf.Revision)
	}
	if cf.Status != ConflictOpen {
		return Conflict{}, httpapi.E(httpapi.KindConflict, "conflict_resolved", "this conflict is resolved already")
	}
	m, err := s.Mapping(ctx, bot, conn)
	if err != nil {
		return Conflict{}, err
	}
	y, err := s.newSyncer(ctx, bot, c, m)
	if err != nil {
		return Conflict{}, err
	}
	var value any
	switch req.Choose {
	case ChoosePlatform:
		value = cf.PlatformValue
	case ChooseCRM:
		value = cf.CRMValue
	default:
		value = req.Value
	}
	f := MappingField{Source: cf.Source, Target: cf.Target, Direction: DirectionBoth}
	if i := slices.IndexFunc(m.Fields, func(x MappingField) bool { return x.Target == cf.Target }); i >= 0 {
		f = m.Fields[i]
	}
	if req.Choose != ChooseCRM {
		person, err := s.subscribers.Subscriber(ctx, bot, cf.SubscriberID)
		if err != nil {
			return Conflict{}, err
		}
		key, ok := keyValue(person, y.cat, m.KeySource)
		if !ok {
			return Conflict{}, httpapi.E(httpapi.KindUnprocessable, "missing_key",
				"the subscriber no longer has the value their record is matched by; set it, then resolve")
		}
		props := map[string]any{cf.Target: value}
		err = retryCall(ctx, func() error { _, err := y.cl.Update(ctx, m.Object, cf.RecordID, props); return err })
		if errors.Is(err, crmapi.ErrNotFound) {
			_, err = y.upsert(ctx, key, props) // the record is gone: the subscriber's, by key
		}
		if err != nil {
			return Conflict{}, s.callProblem(ctx, bot, conn, err)
		}
	}
	if req.Choose != ChoosePlatform {
		var w Write
		if !pullInto(&w, y.cat, f, value) {
			return Conflict{}, httpapi.E(httpapi.KindUnprocessable, "invalid_value",
				"the value does not convert to the subscriber's "+cf.Source)
		}
		if err := s.subscribers.Write(ctx, bot, cf.SubscriberID, w); err != nil {
			return Conflict{}, err
		}
	}
	now := stamp(s.now())
	cf.Status, cf.Resolution, cf.ResolvedValue, cf.ResolvedAt, cf.UpdatedAt = ConflictResolved, req.Choose, value, &now, now
	if caller != nil {
		cf.ResolvedBy = caller.UserID
	}
	it, err := item(conflictKey(bot, conn, id), cf.Revision+1, cf)
	if err != nil {
		return Conflict{}, err
	}
	writes := []store.Write{store.PutOp(it, store.RevisionIs(cf.Revision)),
		store.DeleteOp(openConflictKey(bot, conn, cf.SubscriberID, cf.Target), store.Always)}
	// The field syncs again from the resolved value: both sides hold it now.
	for attempt := 0; ; attempt++ {
		l, err := y.loadLink(ctx, cf.SubscriberID)
		if err != nil {
			return Conflict{}, err
		}
		if l.Synced == nil {
			l.Synced = map[string]any{}
		}
		l.Synced[cf.Target] = value
		l.Conflicts = slices.DeleteFunc(l.Conflicts, func(t string) bool { return t == cf.Target })
		err = y.saveLink(ctx, cf.SubscriberID, l, writes...)
		var ce *store.ConditionError
		switch {
		case err == nil:
			cf.Revision++
			return cf, nil
		case errors.As(err, &ce) && ce.Index == 1:
			return Conflict{}, httpapi.StaleRevision(cf.Revision + 1) // resolved concurrently
		case errors.Is(err, store.ErrConditionFailed) && attempt < 3:
			continue // the link changed meanwhile
		default:
			return Conflict{}, err
		}
	}
}

func isNotFound(err error) bool {
	var he *httpapi.Error
	return errors.As(err, &he) && he.Status() == http.StatusNotFound
}
