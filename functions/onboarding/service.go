// Package onboarding serves outcome onboarding (issue 16, docs/onboarding.md): one session
// per account holding the outcome the customer wants, their vertical and channels, and the
// playbook the catalog recommends for them (functions/playbooks/catalog's Recommend),
// recomputed on every change, until the customer completes it.
package onboarding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// The statuses of a session.
const (
	StatusActive    = "active"
	StatusCompleted = "completed"
)

// idPrefix prefixes session ids.
const idPrefix = "obs"

// The access of the onboarding routes: account-level, personal access tokens only.
var (
	readAccess  = httpapi.NeedPAT("bots:read")
	writeAccess = httpapi.NeedPAT("bots:write")
)

// Session is an account's onboarding.
type Session struct {
	ID             string                 `json:"id"`
	Status         string                 `json:"status"`
	Outcome        string                 `json:"outcome"`
	Vertical       string                 `json:"vertical"`
	Channels       []string               `json:"channels"`
	BotID          *string                `json:"bot_id"`
	InstallID      *string                `json:"install_id"`
	Recommendation catalog.Recommendation `json:"recommendation"`
	Revision       int64                  `json:"revision"`
	CreatedAt      time.Time              `json:"created_at"`
	UpdatedAt      time.Time              `json:"updated_at"`
	CompletedAt    *time.Time             `json:"completed_at"`
}

// Storage: one item per account.
//
//	ACCT#<acct>#ONBOARDING  SESSION  the session (Session)
func sessionKey(account string) store.Key {
	return store.Key{PK: "ACCT#" + account + "#ONBOARDING", SK: "SESSION"}
}

// Install is what onboarding needs to know of a playbook install.
type Install struct {
	BotID     string
	Status    string // the playbooks family's status, shown in a refusal
	Installed bool
}

// InstallLookup finds one of the account's playbook installs, or answers a 404 error (the
// playbooks family's playbooks.InstallState, adapted by the wiring).
type InstallLookup func(ctx context.Context, account, id string) (Install, error)

// Service serves onboarding sessions.
type Service struct {
	store    store.Store
	bots     httpapi.BotLoader
	installs InstallLookup
	now      func() time.Time
}

// New builds the service; bots is the kernel's tenancy check (a bot_id must be the
// account's), installs checks an install_id.
func New(st store.Store, bots httpapi.BotLoader, installs InstallLookup, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, bots: bots, installs: installs, now: now}
}

func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

func sessionNotFound() error { return httpapi.NotFound("onboarding session") }

// Fields are the members a create or a patch sets.
type Fields struct {
	Outcome  *string   `json:"outcome"`
	Vertical *string   `json:"vertical"`
	Channels *[]string `json:"channels"`
	BotID    *string   `json:"bot_id"`
}

// check adds the problems of the members given (fresh: outcome and vertical required).
func (f Fields) check(p *httpapi.Problems, fresh bool) {
	if f.Outcome == nil && fresh {
		p.Add("outcome", "is required: one of %s", strings.Join(catalog.Outcomes(), ", "))
	} else if f.Outcome != nil && !slices.Contains(catalog.Outcomes(), *f.Outcome) {
		p.Add("outcome", "must be one of %s", strings.Join(catalog.Outcomes(), ", "))
	}
	if f.Vertical == nil && fresh {
		p.Add("vertical", "is required: one of %s", strings.Join(catalog.Verticals(), ", "))
	} else if f.Vertical != nil && !slices.Contains(catalog.Verticals(), *f.Vertical) {
		p.Add("vertical", "must be one of %s", strings.Join(catalog.Verticals(), ", "))
	}
	if f.Channels != nil {
		for i, c := range *f.Channels {
			if !slices.Contains(channel.Kinds(), channel.Kind(c)) {
				p.Add(fmt.Sprintf("channels[%d]", i), "must be one of telegram, whatsapp, vk")
			}
		}
	}
	if f.BotID != nil && !ids.Valid("bot", *f.BotID) {
		p.Add("bot_id", "must be a bot id (bot_...)")
	}
}

// Validate checks a create body.
func (f *Fields) Validate() error {
	var p httpapi.Problems
	f.check(&p, true)
	return p.Err()
}

// checkBot makes sure bot, when given, is the caller's (404 otherwise).
func (s *Service) checkBot(ctx context.Context, p *auth.Principal, bot *string) error {
	if bot == nil {
		return nil
	}
	_, err := httpapi.Authorize(ctx, s.bots, writeAccess, p, true, *bot)
	return err
}

// apply sets f on ss and recomputes the recommendation.
func apply(ss *Session, f Fields) {
	if f.Outcome != nil {
		ss.Outcome = *f.Outcome
	}
	if f.Vertical != nil {
		ss.Vertical = *f.Vertical
	}
	if f.Channels != nil {
		var chs []string
		for _, c := range *f.Channels {
			if !slices.Contains(chs, c) {
				chs = append(chs, c)
			}
		}
		ss.Channels = chs
	}
	if ss.Channels == nil {
		ss.Channels = []string{}
	}
	if f.BotID != nil {
		b := *f.BotID
		ss.BotID = &b
	}
	ss.Recommendation, _ = catalog.Recommend(ss.Vertical, ss.Outcome, ss.Channels)
}

func (s *Service) load(ctx context.Context, account string) (Session, error) {
	it, err := s.store.Get(ctx, sessionKey(account))
	if errors.Is(err, store.ErrNotFound) {
		return Session{}, sessionNotFound()
	}
	if err != nil {
		return Session{}, err
	}
	return store.Decode[Session](it)
}

func (s *Service) put(ctx context.Context, account string, ss Session, cond store.Condition) error {
	data, err := store.Encode(ss)
	if err != nil {
		return err
	}
	return s.store.Put(ctx, store.Item{Key: sessionKey(account), Data: data, Revision: ss.Revision}, cond)
}

func exists(ss Session) error {
	return httpapi.E(httpapi.KindConflict, "onboarding_session_exists",
		"the account has an onboarding session; PATCH it, or complete it before starting another").With("session_id", ss.ID)
}

func completed() error {
	return httpapi.E(httpapi.KindConflict, "onboarding_completed", "the onboarding session is completed; POST a new one to start again")
}

// Create starts the account's onboarding. A session that is active is 409
// onboarding_session_exists; a completed one is replaced by the new one.
func (s *Service) Create(ctx context.Context, p *auth.Principal, f Fields) (Session, error) {
	if err := s.checkBot(ctx, p, f.BotID); err != nil {
		return Session{}, err
	}
	cur, err := s.load(ctx, p.AccountID)
	cond := store.MustNotExist
	switch {
	case err == nil && cur.Status == StatusActive:
		return Session{}, exists(cur)
	case err == nil:
		cond = store.RevisionIs(cur.Revision)
	case httpapi.KindOf(err) != httpapi.KindNotFound:
		return Session{}, err
	}
	at := s.now()
	ss := Session{ID: ids.At(idPrefix, at), Status: StatusActive, Revision: cur.Revision + 1, CreatedAt: stamp(at), UpdatedAt: stamp(at)}
	apply(&ss, f)
	err = s.put(ctx, p.AccountID, ss, cond)
	if errors.Is(err, store.ErrConditionFailed) {
		if cur, gerr := s.load(ctx, p.AccountID); gerr == nil && cur.Status == StatusActive {
			return Session{}, exists(cur)
		}
		return Session{}, httpapi.E(httpapi.KindConflict, "onboarding_session_exists", "another onboarding session was started meanwhile")
	}
	if err != nil {
		return Session{}, fmt.Errorf("create onboarding session: %w", err)
	}
	return ss, nil
}

// Get returns the account's session.
func (s *Service) Get(ctx context.Context, p *auth.Principal) (Session, error) {
	return s.load(ctx, p.AccountID)
}

// PatchRequest is the body of PATCH /api/onboarding/session.
type PatchRequest struct {
	Fields
	ExpectedRevision *int64 `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (r *PatchRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(r.ExpectedRevision)
	r.check(&p, false)
	return p.Err()
}

// update changes the session at revision expected (nil: any) with change.
func (s *Service) update(ctx context.Context, p *auth.Principal, expected *int64, change func(*Session)) (Session, error) {
	ss, err := s.load(ctx, p.AccountID)
	if err != nil {
		return Session{}, err
	}
	if expected != nil && *expected != ss.Revision {
		return Session{}, httpapi.StaleRevision(ss.Revision)
	}
	if ss.Status == StatusCompleted {
		return Session{}, completed()
	}
	prev := ss.Revision
	change(&ss)
	ss.Revision++
	ss.UpdatedAt = stamp(s.now())
	err = s.put(ctx, p.AccountID, ss, store.RevisionIs(prev))
	if errors.Is(err, store.ErrConditionFailed) {
		cur, gerr := s.load(ctx, p.AccountID)
		if gerr != nil {
			return Session{}, gerr
		}
		return Session{}, httpapi.StaleRevision(cur.Revision)
	}
	return ss, err
}

// Patch changes the session's outcome, vertical, channels or bot and recomputes the
// recommendation.
func (s *Service) Patch(ctx context.Context, p *auth.Principal, req PatchRequest) (Session, error) {
	if err := s.checkBot(ctx, p, req.BotID); err != nil {
		return Session{}, err
	}
	return s.update(ctx, p, req.ExpectedRevision, func(ss *Session) { apply(ss, req.Fields) })
}

// CompleteRequest is the body of POST /api/onboarding/session/complete.
type CompleteRequest struct {
	BotID            *string `json:"bot_id"`
	InstallID        *string `json:"install_id"`
	ExpectedRevision *int64  `json:"expected_revision"`
}

// Validate checks the ids' form.
func (r *CompleteRequest) Validate() error {
	var p httpapi.Problems
	if r.BotID != nil && !ids.Valid("bot", *r.BotID) {
		p.Add("bot_id", "must be a bot id (bot_...)")
	}
	if r.InstallID != nil && !ids.Valid("pbi", *r.InstallID) {
		p.Add("install_id", "must be a playbook install id (pbi_...)")
	}
	return p.Err()
}

// Complete ends the session, recording the bot and the playbook install it led to. The
// install must be one of the account's (404 otherwise), installed (409
// playbook_not_installed: an onboarding ends with a working bot, not a half-set-up one) and
// on the bot when both are given; given alone, its bot is the session's.
func (s *Service) Complete(ctx context.Context, p *auth.Principal, req CompleteRequest) (Session, error) {
	if err := s.checkBot(ctx, p, req.BotID); err != nil {
		return Session{}, err
	}
	if req.InstallID != nil {
		if s.installs == nil {
			return Session{}, httpapi.NotFound("playbook install")
		}
		in, err := s.installs(ctx, p.AccountID, *req.InstallID)
		if err != nil {
			return Session{}, err
		}
		if req.BotID != nil && *req.BotID != in.BotID {
			var prob httpapi.Problems
			prob.Add("install_id", "is an install on another bot than bot_id")
			return Session{}, prob.Err()
		}
		if !in.Installed {
			return Session{}, httpapi.Errorf(httpapi.KindConflict, "playbook_not_installed",
				"the playbook install is %s, not installed: install it, then complete the onboarding", in.Status).With("install_status", in.Status)
		}
		req.BotID = &in.BotID
	}
	return s.update(ctx, p, req.ExpectedRevision, func(ss *Session) {
		now := stamp(s.now())
		ss.Status, ss.CompletedAt = StatusCompleted, &now
		if req.BotID != nil {
			ss.BotID = req.BotID
		}
		if req.InstallID != nil {
			ss.InstallID = req.InstallID
		}
	})
}
