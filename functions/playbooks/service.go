// Package playbooks serves the playbook catalog and playbook installs (issue 16,
// docs/playbooks.md): vertical templates a customer sets up step by step (answers saved as
// they come), checks (preflight: what will be created, name conflicts, missing answers, plan
// features and channels), installs all-or-nothing through the families that own each
// resource (labels and fields: subscribers; content documents, created and published;
// popups; collections; reactions, created and published), upgrades to a
// newer catalog version keeping the customer's edits, and judges by KPIs read from the
// bot's event log.
//
// The family calls the other families in process through the small interfaces it declares
// here (Kind, Channels); its wiring adapts their services to them.
package playbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// idPrefix prefixes install ids.
const idPrefix = "pbi"

// The access of the playbook routes and tools. No route has {botID} in its path, so the
// kernel checks the scope and the rollout only (and refuses bot tokens); the service checks
// the rights on the install's bot (Authorize), once that bot is known to be the caller's,
// exactly as a {botID} route's would be.
var (
	readAccess  = httpapi.Need("bots:read").InRollout(auth.RolloutPlaybooks)
	writeAccess = httpapi.Need("bots:write").InRollout(auth.RolloutPlaybooks)
)

// onBot is a's access with rights, for the check on the install's bot.
func onBot(a httpapi.Access, rights ...auth.Right) httpapi.Access {
	a.Rights = auth.RightsOf(rights...)
	return a
}

// The access checked on the bot: writes need the Reactions right (an install creates
// reactions and the labels, fields and collections they use), KPIs the Analytics right.
var (
	botRead  = readAccess
	botWrite = onBot(writeAccess, auth.RightReactions)
	botKPIs  = onBot(readAccess, auth.RightAnalytics)
)

// Existing is a resource of a bot as a Kind reads it.
type Existing struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// Fingerprint is a hash of what the resource is now (its name and definition), as
	// Fingerprint computes it from the family's own view of it.
	Fingerprint string
}

// ErrGone is what Kind.Get returns for a resource that no longer exists.
var ErrGone = errors.New("playbooks: the resource no longer exists")

// ErrUnsupported is what Kind.Update returns for a kind whose resources an upgrade does not
// change (every kind but reactions: the catalog's later versions only add labels, fields,
// content, popups and collections, never change them).
var ErrUnsupported = errors.New("playbooks: this kind of resource is not updated")

// Kind is one kind of resource an install creates, through the family that owns it.
type Kind interface {
	// List returns every resource of the kind in the bot.
	List(ctx context.Context, bot string) ([]Existing, error)
	// Get returns one (ErrGone when it does not exist).
	Get(ctx context.Context, bot, id string) (Existing, error)
	// Create makes one from its family's create body (a reaction and a content document are
	// also published).
	Create(ctx context.Context, bot string, spec json.RawMessage) (Existing, error)
	// Update makes the resource what spec says (a reaction's draft, published).
	Update(ctx context.Context, bot, id string, spec json.RawMessage) (Existing, error)
	// Delete removes it; a resource that does not exist is no error. A content document,
	// which its family never deletes, is archived: out of the bot's documents and unsendable.
	Delete(ctx context.Context, bot, id string) error
}

// Channels tells the channel kinds a bot has connected (telegram, whatsapp, ...).
type Channels interface {
	Kinds(ctx context.Context, bot string) ([]string, error)
}

// Fingerprint hashes a resource's view: what Kind implementations return as Existing's.
func Fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return hash(b)
}

// Config is what the service is built from.
type Config struct {
	Store   store.Store
	Catalog *catalog.Catalog
	// Kinds are the resource kinds by catalog kind (catalog.KindLabel, ...).
	Kinds    map[string]Kind
	Channels Channels
	// Bots is the kernel's tenancy check.
	Bots   httpapi.BotLoader
	Events eventlog.Log
	// Jobs starts the rollback of abandoned installs (JobRecover); nil: only reads recover.
	Jobs jobs.Starter
	// StuckAfter is how long an installing install may go without a heartbeat before it
	// counts as abandoned; 0 means DefaultStuckAfter.
	StuckAfter time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// Service serves the catalog and installs.
type Service struct {
	store    store.Store
	catalog  *catalog.Catalog
	kinds    map[string]Kind
	channels Channels
	bots     httpapi.BotLoader
	events   eventlog.Log
	jobs     jobs.Starter
	// stuckAfter: Config.StuckAfter.
	stuckAfter time.Duration
	now        func() time.Time
	log        *slog.Logger
}

// New builds the service.
func New(c Config) *Service {
	s := &Service{store: c.Store, catalog: c.Catalog, kinds: c.Kinds, channels: c.Channels, bots: c.Bots,
		events: c.Events, jobs: c.Jobs, stuckAfter: c.StuckAfter, now: c.Now, log: c.Log}
	if s.stuckAfter <= 0 {
		s.stuckAfter = DefaultStuckAfter
	}
	if s.catalog == nil {
		s.catalog = catalog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// stamp is a resource timestamp: UTC, whole seconds.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

func installNotFound() error { return httpapi.NotFound("playbook install") }

func playbookNotFound() error { return httpapi.NotFound("playbook") }

// authorize checks access for p on bot: the bot is p's (else 404), then the rights.
func (s *Service) authorize(ctx context.Context, p *auth.Principal, access httpapi.Access, bot string) error {
	_, err := httpapi.Authorize(ctx, s.bots, access, p, true, bot)
	return err
}

// Catalog returns the newest version of every playbook of vertical ("" for all).
func (s *Service) Catalog(vertical string) []catalog.Playbook { return s.catalog.Latest(vertical) }

// Playbook returns a catalog entry at version (0: the newest).
func (s *Service) Playbook(id string, version int) (catalog.Playbook, error) {
	p, ok := s.catalog.Get(id, version)
	if !ok {
		if _, any := s.catalog.Get(id, 0); any && version != 0 {
			return catalog.Playbook{}, httpapi.NotFound("playbook version")
		}
		return catalog.Playbook{}, playbookNotFound()
	}
	return p, nil
}

// view is the install as the API shows it: the questions with their answer state.
func (s *Service) view(rec record) Install {
	in := rec.Install
	if in.Answers == nil {
		in.Answers = map[string]any{}
	}
	if in.Resources == nil {
		in.Resources = []Resource{}
	}
	if in.Journal == nil {
		in.Journal = []JournalEntry{}
	}
	in.Questions = []QuestionState{}
	if pb, ok := s.catalog.Get(in.PlaybookID, in.Version); ok {
		for _, q := range pb.Questions {
			_, answered := in.Answers[q.ID]
			in.Questions = append(in.Questions, QuestionState{Question: q, Answered: answered})
		}
	}
	return in
}

// CreateRequest is the body of POST /api/playbook-installs.
type CreateRequest struct {
	BotID      string `json:"bot_id"`
	PlaybookID string `json:"playbook_id"`
	// Version is the catalog version to install (0 or absent: the newest).
	Version int `json:"version"`
}

// Validate checks the request's form.
func (r *CreateRequest) Validate() error {
	var p httpapi.Problems
	p.Require("bot_id", r.BotID)
	p.Require("playbook_id", r.PlaybookID)
	if r.Version < 0 {
		p.Add("version", "must be a catalog version (1 or more), or left out for the newest")
	}
	return p.Err()
}

// Create starts setting up a playbook on the caller's bot: an install in status setup,
// answers still to give.
func (s *Service) Create(ctx context.Context, p *auth.Principal, req CreateRequest) (Install, error) {
	if err := req.Validate(); err != nil {
		return Install{}, err
	}
	if err := s.authorize(ctx, p, botWrite, req.BotID); err != nil {
		return Install{}, err
	}
	pb, ok := s.catalog.Get(req.PlaybookID, req.Version)
	if !ok {
		var pr httpapi.Problems
		if _, any := s.catalog.Get(req.PlaybookID, 0); any {
			pr.Add("version", "playbook %s has no version %d (versions: %s)", req.PlaybookID, req.Version, versions(s.catalog.Versions(req.PlaybookID)))
		} else {
			pr.Add("playbook_id", "is not a playbook of the catalog (GET /api/playbooks/catalog)")
		}
		return Install{}, pr.Err()
	}
	at := s.now()
	now := stamp(at)
	rec := record{AccountID: p.AccountID, Install: Install{
		ID: ids.At(idPrefix, at), BotID: req.BotID, PlaybookID: pb.ID, Version: pb.Version, Status: StatusSetup,
		Answers: map[string]any{}, Revision: 1, CreatedAt: now, UpdatedAt: now,
	}}
	it, err := recordItem(rec)
	if err != nil {
		return Install{}, err
	}
	ptr, err := store.Encode(pointer{BotID: req.BotID})
	if err != nil {
		return Install{}, err
	}
	err = s.store.Transact(ctx, []store.Write{
		store.PutOp(it, store.MustNotExist),
		store.PutOp(store.Item{Key: pointerKey(p.AccountID, rec.ID), Data: ptr, Revision: 1}, store.MustNotExist),
	})
	if err != nil {
		return Install{}, fmt.Errorf("create install: %w", err)
	}
	return s.view(rec), nil
}

func versions(v []int) string {
	out := make([]string, len(v))
	for i, n := range v {
		out[i] = fmt.Sprint(n)
	}
	return strings.Join(out, ", ")
}

func recordItem(rec record) (store.Item, error) {
	data, err := store.Encode(rec)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: installKey(rec.BotID, rec.ID), Data: data, Revision: rec.Revision}, nil
}

// read loads an install by its bot, recovering it first when its install was abandoned.
func (s *Service) read(ctx context.Context, bot, id string) (record, error) {
	it, err := s.store.Get(ctx, installKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, installNotFound()
	}
	if err != nil {
		return record{}, err
	}
	rec, err := store.Decode[record](it)
	if err != nil {
		return record{}, err
	}
	if s.stuck(rec) {
		return s.recover(ctx, rec)
	}
	return rec, nil
}

// locate finds the bot of the caller's install id (404 outside the account), loads the
// install and checks access on its bot.
func (s *Service) locate(ctx context.Context, p *auth.Principal, access httpapi.Access, id string) (record, error) {
	if !ids.Valid(idPrefix, id) {
		return record{}, installNotFound()
	}
	it, err := s.store.Get(ctx, pointerKey(p.AccountID, id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, installNotFound()
	}
	if err != nil {
		return record{}, err
	}
	ptr, err := store.Decode[pointer](it)
	if err != nil {
		return record{}, err
	}
	if err := s.authorize(ctx, p, access, ptr.BotID); err != nil {
		return record{}, err
	}
	return s.read(ctx, ptr.BotID, id)
}

// Get returns one of the caller's installs.
func (s *Service) Get(ctx context.Context, p *auth.Principal, id string) (Install, error) {
	rec, err := s.locate(ctx, p, botRead, id)
	if err != nil {
		return Install{}, err
	}
	return s.view(rec), nil
}

// List returns a page of the installs of one of the caller's bots (bot "": of every bot of
// the account), oldest first.
func (s *Service) List(ctx context.Context, p *auth.Principal, bot string, limit int, cursor string) ([]Install, string, error) {
	if bot != "" {
		if err := s.authorize(ctx, p, botRead, bot); err != nil {
			return nil, "", err
		}
		page, err := s.store.Query(ctx, store.Query{PK: installsPK(bot), Limit: limit, Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		out := make([]Install, 0, len(page.Items))
		for _, it := range page.Items {
			rec, err := store.Decode[record](it)
			if err != nil {
				return nil, "", err
			}
			out = append(out, s.view(rec))
		}
		return out, page.Next, nil
	}
	page, err := s.store.Query(ctx, store.Query{PK: pointersPK(p.AccountID), Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Install, 0, len(page.Items))
	for _, it := range page.Items {
		ptr, err := store.Decode[pointer](it)
		if err != nil {
			return nil, "", err
		}
		rec, err := s.read(ctx, ptr.BotID, it.SK)
		if httpapi.KindOf(err) == httpapi.KindNotFound {
			continue // its bot was deleted meanwhile: the purge removes the pointer
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, s.view(rec))
	}
	return out, page.Next, nil
}

// save writes rec at its current revision and moves it to the next: every write of an
// install is conditioned on the revision it read, so two writers never both win.
func (s *Service) save(ctx context.Context, rec *record) error {
	expected := rec.Revision
	rec.Revision++
	rec.UpdatedAt = stamp(s.now())
	it, err := recordItem(*rec)
	if err != nil {
		return err
	}
	err = s.store.Put(ctx, it, store.RevisionIs(expected))
	if errors.Is(err, store.ErrConditionFailed) {
		rec.Revision = expected
		cur, gerr := s.store.Get(ctx, installKey(rec.BotID, rec.ID))
		if gerr != nil {
			return gerr
		}
		return httpapi.StaleRevision(cur.Revision)
	}
	return err
}

func checkRevision(rec record, expected *int64) error {
	if expected != nil && *expected != rec.Revision {
		return httpapi.StaleRevision(rec.Revision)
	}
	return nil
}

// stateError is the 409 of an operation the install's status does not allow.
func stateError(rec record, doing string) error {
	switch rec.Status {
	case StatusInstalling:
		return httpapi.Errorf(httpapi.KindConflict, "install_in_progress", "the install is installing; %s once it is done", doing).
			With("install_status", rec.Status)
	case StatusInstalled:
		return httpapi.Errorf(httpapi.KindConflict, "playbook_installed", "the playbook is installed; you cannot %s", doing).
			With("install_status", rec.Status)
	}
	return httpapi.Errorf(httpapi.KindConflict, "playbook_not_installed", "the playbook is not installed (status %s); install it first", rec.Status).
		With("install_status", rec.Status)
}

// PatchRequest is the body of PATCH /api/playbook-installs/{installID}.
type PatchRequest struct {
	Answers          map[string]json.RawMessage `json:"answers"`
	ExpectedRevision *int64                     `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (r *PatchRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(r.ExpectedRevision)
	if r.Answers == nil {
		p.Add("answers", "is required: an object of question id to answer")
	}
	return p.Err()
}

// Answer saves answers to the install's questions, merged into those given before (an
// answer of null removes one). Setup is resumable: any subset, in any order, any number of
// times, until the playbook is installed.
func (s *Service) Answer(ctx context.Context, p *auth.Principal, id string, req PatchRequest) (Install, error) {
	rec, err := s.locate(ctx, p, botWrite, id)
	if err != nil {
		return Install{}, err
	}
	if err := checkRevision(rec, req.ExpectedRevision); err != nil {
		return Install{}, err
	}
	if rec.Status == StatusInstalling || rec.Status == StatusInstalled {
		return Install{}, stateError(rec, "change its answers")
	}
	pb, ok := s.catalog.Get(rec.PlaybookID, rec.Version)
	if !ok {
		return Install{}, fmt.Errorf("playbooks: install %s names %s v%d, not in the catalog", rec.ID, rec.PlaybookID, rec.Version)
	}
	answers, err := mergeAnswers(pb, rec.Answers, req.Answers)
	if err != nil {
		return Install{}, err
	}
	if equalJSON(answers, rec.Answers) {
		return s.view(rec), nil
	}
	rec.Answers = answers
	if err := s.save(ctx, &rec); err != nil {
		return Install{}, err
	}
	return s.view(rec), nil
}

// mergeAnswers returns current with given merged in (null removes an answer): each a
// question of pb, of its type, saved normalized; every problem is one 400 naming
// answers.<id>.
func mergeAnswers(pb catalog.Playbook, current map[string]any, given map[string]json.RawMessage) (map[string]any, error) {
	answers := maps.Clone(current)
	if answers == nil {
		answers = map[string]any{}
	}
	var pr httpapi.Problems
	for _, qid := range sortedKeys(given) {
		raw := given[qid]
		field := "answers." + qid
		q, ok := pb.Question(qid)
		if !ok {
			pr.Add(field, "is not a question of %s v%d", pb.ID, pb.Version)
			continue
		}
		if string(raw) == "null" {
			delete(answers, qid)
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			pr.Add(field, "is not a JSON value")
			continue
		}
		if msg := catalog.CheckAnswer(q, v); msg != "" {
			pr.Add(field, "%s", msg)
			continue
		}
		answers[qid] = catalog.NormalizeAnswer(q, v)
	}
	return answers, pr.Err()
}

func equalJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}

// Delete removes an install that is not installed (setup or failed): installed resources
// are the customer's, and an install mid-way is the process's.
func (s *Service) Delete(ctx context.Context, p *auth.Principal, id string, expected *int64) error {
	rec, err := s.locate(ctx, p, botWrite, id)
	if err != nil {
		return err
	}
	if err := checkRevision(rec, expected); err != nil {
		return err
	}
	if rec.Status == StatusInstalling || rec.Status == StatusInstalled {
		return stateError(rec, "delete it")
	}
	if pending := unfinished(rec.Journal); len(pending) > 0 {
		// A failed install whose rollback did not finish: finish it first, so that nothing
		// it created outlives the record of it.
		if err := s.rollback(ctx, &rec); err != nil {
			return err
		}
	}
	err = s.store.Transact(ctx, []store.Write{
		store.DeleteOp(installKey(rec.BotID, rec.ID), store.RevisionIs(rec.Revision)),
		store.DeleteOp(pointerKey(p.AccountID, rec.ID), store.Always),
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		cur, gerr := s.read(ctx, rec.BotID, rec.ID)
		if gerr != nil {
			return gerr
		}
		return httpapi.StaleRevision(cur.Revision)
	}
	return err
}
