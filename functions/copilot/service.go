// Package copilot serves copilot proposals (issue 15): a goal in words becomes, through
// managed AI, a proposed change to a reaction's draft, shown as a diff against that draft,
// which can be validated as publishing would, simulated on sample subscribers with the
// runtime's own step semantics, applied as a new draft revision (never published), or
// rejected.
//
// The family composes three others, one way: the reactions family holds the drafts and
// their rules (functions/reactions: the draft, validation, updates, the reaction index),
// the runtime runs flows (functions/runtime: its pure simulator) and the managed AI family
// generates and meters the proposal (functions/ai, called in process, so usage, BYOK and
// provider errors are its own). docs/copilot.md is the contract.
package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/functions/ai"
	"github.com/botplatform/api/functions/reactions"
	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// idPrefix prefixes proposal ids.
const idPrefix = "cpp"

// The access of the copilot routes and tools. None has {botID} in its path, so the kernel
// checks the scope, the plan and the rollout only; the Reactions right of the writes is
// checked by the service on the bot of the reaction (Authorize), once that bot is known to
// be the caller's, exactly as a {botID} route's would be.
var (
	readAccess   = httpapi.Need("reactions:read").InRollout(auth.RolloutCopilot)
	writeAccess  = httpapi.Need("reactions:write").InRollout(auth.RolloutCopilot)
	createAccess = writeAccess.InPlan(auth.FeatureManagedAI)
)

// withRight is a's access with the Reactions right, for the check on the proposal's bot.
func withRight(a httpapi.Access) httpapi.Access {
	a.Rights = auth.RightsOf(auth.RightReactions)
	return a
}

// AI generates text: functions/ai's Service.
type AI interface {
	Respond(ctx context.Context, account, key string, req ai.ResponseRequest, delta func(string) error) (ai.Response, bool, error)
}

// Bots is what the family needs of the bots family: the tenancy check of a bot (the
// kernel's loader) and the account's bots (the reaction index's fallback).
type Bots interface {
	httpapi.BotLoader
	reactions.AccountBots
}

// Config is what the service is built from.
type Config struct {
	Store     store.Store
	Reactions *reactions.Service
	// Vocabulary is the bots' labels and fields (the subscribers family's).
	Vocabulary reactions.Vocabulary
	Bots       Bots
	AI         AI
	Now        func() time.Time
	Log        *slog.Logger
}

// Service serves copilot proposals.
type Service struct {
	store     store.Store
	reactions *reactions.Service
	vocab     reactions.Vocabulary
	bots      Bots
	ai        AI
	now       func() time.Time
	log       *slog.Logger
}

// New builds the service.
func New(c Config) *Service {
	s := &Service{store: c.Store, reactions: c.Reactions, vocab: c.Vocabulary, bots: c.Bots, ai: c.AI, now: c.Now, log: c.Log}
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

func proposalNotFound() error { return httpapi.NotFound("proposal") }

// authorize checks access for p on bot: the bot is p's (else 404), then the rights.
func (s *Service) authorize(ctx context.Context, p *auth.Principal, access httpapi.Access, bot string) error {
	_, err := httpapi.Authorize(ctx, s.bots, access, p, true, bot)
	return err
}

// reactionBot finds the bot of the caller's reaction rootID and checks access on it.
func (s *Service) reactionBot(ctx context.Context, p *auth.Principal, access httpapi.Access, rootID string) (string, error) {
	bot, err := s.reactions.BotOf(ctx, s.bots, p.AccountID, rootID)
	if err != nil {
		return "", err
	}
	return bot, s.authorize(ctx, p, access, bot)
}

// CreateRequest is the body of POST /api/reactions/{rootID}/copilot/proposals.
type CreateRequest struct {
	Goal string `json:"goal"`
	// Profile is fast, balanced or quality (default balanced).
	Profile string `json:"profile"`
	// Provider is auto (default) or a provider's name.
	Provider string `json:"provider"`
}

// Validate checks the request's form, every problem at once.
func (r *CreateRequest) Validate() error {
	if r.Profile == "" {
		r.Profile = ai.ProfileBalanced
	}
	if r.Provider == "" {
		r.Provider = ai.ProviderAuto
	}
	var p httpapi.Problems
	r.Goal = strings.TrimSpace(r.Goal)
	switch n := utf8.RuneCountInString(r.Goal); {
	case n == 0:
		p.Add("goal", "is required: what the reaction should do, in words")
	case n > MaxGoalLen:
		p.Add("goal", "has %d characters; at most %d", n, MaxGoalLen)
	case !utf8.ValidString(r.Goal):
		p.Add("goal", "must be UTF-8 text")
	}
	if !contains(ai.Profiles, r.Profile) {
		p.Add("profile", "must be one of %s", strings.Join(ai.Profiles, ", "))
	}
	if r.Provider != ai.ProviderAuto && !contains(aiapi.Providers, r.Provider) {
		p.Add("provider", "must be auto or one of %s", strings.Join(aiapi.Providers, ", "))
	}
	return p.Err()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Create asks the model for a proposal for the caller's reaction rootID and stores it. An
// answer that is not a usable proposal is 502 copilot_unusable_answer: the generation is
// metered (the provider answered), nothing is stored.
func (s *Service) Create(ctx context.Context, p *auth.Principal, rootID string, req CreateRequest) (Proposal, error) {
	pr, _, err := s.CreateOnce(ctx, p, rootID, "", req)
	return pr, err
}

// CreateOnce is Create under an Idempotency-Key (none: ""), as POST /api/v1/ai/responses
// takes one: the same key with the same reaction and body within ai.IdempotencyTTL answers the
// proposal the first request made (replayed true) without generating again; with another
// reaction or body it is 422 idempotency_key_reused; while the first request still runs, 409
// idempotency_in_flight (the managed AI call's own key, derived from this one, holds it). A
// retry after a failure generates again, except that an answer the provider already gave is
// replayed by managed AI rather than paid twice.
func (s *Service) CreateOnce(ctx context.Context, p *auth.Principal, rootID, key string, req CreateRequest) (Proposal, bool, error) {
	if key != "" {
		if err := ai.CheckIdempotencyKey(key); err != nil {
			return Proposal{}, false, err
		}
	}
	if err := req.Validate(); err != nil {
		return Proposal{}, false, err
	}
	hash := req.hash(rootID)
	if key != "" {
		pr, found, err := s.replay(ctx, p, key, hash)
		if found || err != nil {
			return pr, found, err
		}
	}
	pr, err := s.create(ctx, p, rootID, key, hash, req)
	if errors.Is(err, errKeyTaken) {
		// Another request with the key made its proposal meanwhile: that one is the answer.
		pr, found, err := s.replay(ctx, p, key, hash)
		if err == nil && !found {
			err = fmt.Errorf("copilot: the Idempotency-Key's proposal vanished: %w", store.ErrUnavailable)
		}
		return pr, found, err
	}
	return pr, false, err
}

// errKeyTaken is create's answer when its Idempotency-Key was recorded by another request
// meanwhile.
var errKeyTaken = errors.New("copilot: the Idempotency-Key made a proposal meanwhile")

// replay returns the proposal key made, when it made one (found), for a request of hash;
// another request's hash is 422.
func (s *Service) replay(ctx context.Context, p *auth.Principal, key, hash string) (Proposal, bool, error) {
	it, err := s.store.Get(ctx, idemKey(p.AccountID, key))
	if errors.Is(err, store.ErrNotFound) {
		return Proposal{}, false, nil
	}
	if err != nil {
		return Proposal{}, false, err
	}
	c, err := store.Decode[created](it)
	if err != nil {
		return Proposal{}, false, err
	}
	if c.RequestHash != hash {
		return Proposal{}, false, httpapi.E(httpapi.KindUnprocessable, "idempotency_key_reused",
			"this Idempotency-Key was used with another reaction or request body within 24 hours; use a new key for a new request")
	}
	// The replay answers only a caller who may create there, as the first request did.
	pr, err := s.proposal(ctx, p, withRight(createAccess), c.ProposalID)
	return pr, err == nil, err
}

// hash identifies a create request for its Idempotency-Key: the reaction and the body, its
// defaults filled in.
func (r CreateRequest) hash(rootID string) string {
	b, _ := json.Marshal([]string{rootID, r.Goal, r.Profile, r.Provider})
	return sha256Hex(string(b))
}

// create makes a proposal; with an Idempotency-Key, the proposal is recorded under it in the
// same transaction (errKeyTaken when another request recorded one first).
func (s *Service) create(ctx context.Context, p *auth.Principal, rootID, key, hash string, req CreateRequest) (Proposal, error) {
	bot, err := s.reactionBot(ctx, p, withRight(createAccess), rootID)
	if err != nil {
		return Proposal{}, err
	}
	rx, err := s.reactions.Get(ctx, bot, rootID)
	if err != nil {
		return Proposal{}, err
	}
	v, err := s.vocabulary(ctx, bot)
	if err != nil {
		return Proposal{}, err
	}
	msg, err := userMessage(req.Goal, rx.Content, v)
	if err != nil {
		return Proposal{}, err
	}
	at := s.now()
	id := ids.At(idPrefix, at)
	// Managed AI's own key: the proposal's, or, under an Idempotency-Key, one derived from it,
	// so that a retry's generation replays the answer already paid for.
	aiKey := "copilot:" + id
	if key != "" {
		aiKey = "copilot-key:" + sha256Hex(hash+":"+key)
	}
	temp := 0.0
	resp, _, err := s.ai.Respond(ctx, p.AccountID, aiKey, ai.ResponseRequest{
		Profile: req.Profile, Provider: req.Provider, Instructions: instructions,
		Input:           []aiapi.Message{{Role: aiapi.RoleUser, Content: msg}},
		MaxOutputTokens: maxOutputTokens, Temperature: &temp,
	}, nil)
	if err != nil {
		return Proposal{}, err
	}
	summary, draft, err := parseAnswer(resp.OutputText, rx.Content, rootID)
	if err != nil {
		s.log.WarnContext(ctx, "copilot: an unusable answer", "proposal_id", id, "response_id", resp.ID, "error", err)
		return Proposal{}, err
	}
	now := stamp(at)
	pr := Proposal{
		ID: id, BotID: bot, ReactionID: rootID, Revision: 1, BaseRevision: rx.Revision,
		Goal: req.Goal, Profile: req.Profile, Provider: req.Provider, Summary: summary,
		Draft: draft, Diff: diff(rx.Content, draft), Status: StatusOpen, CreatedAt: now, UpdatedAt: now,
		Usage: Usage{ResponseID: resp.ID, Provider: resp.Provider, Model: resp.Model, Billing: resp.Billing,
			InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, Cost: resp.Usage.Cost},
	}
	it, err := proposalItem(pr)
	if err != nil {
		return Proposal{}, err
	}
	ptr, err := store.Encode(pointer{BotID: bot, ReactionID: rootID})
	if err != nil {
		return Proposal{}, err
	}
	writes := []store.Write{
		store.PutOp(it, store.MustNotExist),
		store.PutOp(store.Item{Key: pointerKey(p.AccountID, id), Data: ptr, Revision: 1}, store.MustNotExist),
	}
	if key != "" {
		rec, err := store.Encode(created{ProposalID: id, RequestHash: hash})
		if err != nil {
			return Proposal{}, err
		}
		writes = append(writes, store.PutOp(store.Item{Key: idemKey(p.AccountID, key), Data: rec, Revision: 1,
			ExpiresAt: store.SecondsPrecision(at.Add(ai.IdempotencyTTL))}, store.MustNotExist))
	}
	err = s.store.Transact(ctx, writes)
	var ce *store.ConditionError
	if key != "" && errors.As(err, &ce) && ce.Index == 2 {
		return Proposal{}, errKeyTaken
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("create proposal: %w", err)
	}
	return pr, nil
}

// vocabulary reads the bot's labels and fields.
func (s *Service) vocabulary(ctx context.Context, bot string) (vocabulary, error) {
	labels, err := s.vocab.Labels(ctx, bot)
	if err != nil {
		return vocabulary{}, fmt.Errorf("copilot: read labels: %w", err)
	}
	fields, err := s.vocab.Fields(ctx, bot)
	if err != nil {
		return vocabulary{}, fmt.Errorf("copilot: read fields: %w", err)
	}
	if labels == nil {
		labels = []reactions.Label{}
	}
	if fields == nil {
		fields = []reactions.Field{}
	}
	return vocabulary{Labels: labels, Fields: fields}, nil
}

func proposalItem(pr Proposal) (store.Item, error) {
	data, err := store.Encode(pr)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: proposalKey(pr.BotID, pr.ReactionID, pr.ID), Data: data, Revision: pr.Revision}, nil
}

// load reads one of the account's proposals: not found for another account's, a
// malformed id or a deleted bot's.
func (s *Service) load(ctx context.Context, account, id string) (Proposal, error) {
	if !ids.Valid(idPrefix, id) {
		return Proposal{}, proposalNotFound()
	}
	it, err := s.store.Get(ctx, pointerKey(account, id))
	if errors.Is(err, store.ErrNotFound) {
		return Proposal{}, proposalNotFound()
	}
	if err != nil {
		return Proposal{}, err
	}
	ptr, err := store.Decode[pointer](it)
	if err != nil {
		return Proposal{}, err
	}
	it, err = s.store.Get(ctx, proposalKey(ptr.BotID, ptr.ReactionID, id))
	if errors.Is(err, store.ErrNotFound) {
		return Proposal{}, proposalNotFound()
	}
	if err != nil {
		return Proposal{}, err
	}
	return store.Decode[Proposal](it)
}

// proposal loads the caller's proposal id and checks access on its bot.
func (s *Service) proposal(ctx context.Context, p *auth.Principal, access httpapi.Access, id string) (Proposal, error) {
	pr, err := s.load(ctx, p.AccountID, id)
	if err != nil {
		return Proposal{}, err
	}
	if err := s.authorize(ctx, p, access, pr.BotID); err != nil {
		return Proposal{}, err
	}
	return pr, nil
}

// Get returns one of the caller's proposals.
func (s *Service) Get(ctx context.Context, p *auth.Principal, id string) (Proposal, error) {
	return s.proposal(ctx, p, readAccess, id)
}

// List returns a page of the proposals of the caller's reaction rootID, newest first.
func (s *Service) List(ctx context.Context, p *auth.Principal, rootID string, limit int, cursor string) ([]Proposal, string, error) {
	bot, err := s.reactionBot(ctx, p, readAccess, rootID)
	if err != nil {
		return nil, "", err
	}
	page, err := s.store.Query(ctx, store.Query{PK: proposalsPK(bot), Prefix: rootID + "#", Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Proposal, 0, len(page.Items))
	for _, it := range page.Items {
		pr, err := store.Decode[Proposal](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, pr)
	}
	return out, page.Next, nil
}

// save writes pr's next revision, conditioned on the one read; a proposal changed
// meanwhile is 409 stale_revision.
func (s *Service) save(ctx context.Context, pr *Proposal) error {
	prev := pr.Revision
	pr.Revision++
	pr.UpdatedAt = stamp(s.now())
	it, err := proposalItem(*pr)
	if err != nil {
		return err
	}
	err = s.store.Put(ctx, it, store.RevisionIs(prev))
	if errors.Is(err, store.ErrConditionFailed) {
		cur, gerr := s.store.Get(ctx, it.Key)
		if gerr != nil {
			return gerr
		}
		return httpapi.StaleRevision(cur.Revision)
	}
	return err
}

// Validate checks the proposed draft as publishing it would be checked, against the bot as
// it is now, and keeps the outcome as the proposal's last validation.
func (s *Service) Validate(ctx context.Context, p *auth.Principal, id string) (Validation, error) {
	pr, err := s.proposal(ctx, p, withRight(writeAccess), id)
	if err != nil {
		return Validation{}, err
	}
	c := pr.Draft
	problems, err := s.reactions.Problems(ctx, pr.BotID, pr.ReactionID, &c)
	if err != nil {
		return Validation{}, err
	}
	if problems == nil {
		problems = []httpapi.FieldError{}
	}
	v := Validation{Valid: len(problems) == 0, Problems: problems, CheckedAt: stamp(s.now())}
	pr.LastValidation = &v
	s.record(ctx, &pr)
	return v, nil
}

// record keeps a validation's or simulation's outcome on the proposal. Losing it to a
// concurrent change of the proposal costs only the record, not the answer: logged.
func (s *Service) record(ctx context.Context, pr *Proposal) {
	if err := s.save(ctx, pr); err != nil {
		s.log.WarnContext(ctx, "copilot: keeping a proposal's last outcome failed", "proposal_id", pr.ID, "error", err)
	}
}

// decide moves an open proposal to status, at the caller's expected revision if given.
func decideErr(pr Proposal, expected *int64) error {
	if expected != nil && *expected != pr.Revision {
		return httpapi.StaleRevision(pr.Revision)
	}
	if pr.Status != StatusOpen {
		return httpapi.Errorf(httpapi.KindConflict, "proposal_not_open", "the proposal is %s; only an open proposal can be applied or rejected", pr.Status).
			With("proposal_status", pr.Status)
	}
	return nil
}

// Reject marks an open proposal rejected.
func (s *Service) Reject(ctx context.Context, p *auth.Principal, id string, expected *int64) (Proposal, error) {
	pr, err := s.proposal(ctx, p, withRight(writeAccess), id)
	if err != nil {
		return Proposal{}, err
	}
	if err := decideErr(pr, expected); err != nil {
		return Proposal{}, err
	}
	now := stamp(s.now())
	pr.Status, pr.DecidedAt = StatusRejected, &now
	if err := s.save(ctx, &pr); err != nil {
		return Proposal{}, err
	}
	return pr, nil
}

// Applied is the answer of an apply: the reaction with its new draft, and the proposal.
type Applied struct {
	Reaction reactions.Reaction `json:"reaction"`
	Proposal Proposal           `json:"proposal"`
}

// Apply makes the proposed draft the reaction's draft, through the reactions family's
// update at the proposal's base revision: a draft that moved since is 409 proposal_stale
// (and the proposal is superseded). It never publishes. The reaction's other open
// proposals are superseded.
func (s *Service) Apply(ctx context.Context, p *auth.Principal, id string, expected *int64) (Applied, error) {
	pr, err := s.proposal(ctx, p, withRight(writeAccess), id)
	if err != nil {
		return Applied{}, err
	}
	if err := decideErr(pr, expected); err != nil {
		return Applied{}, err
	}
	d := pr.Draft
	rx, err := s.reactions.Update(ctx, pr.BotID, pr.ReactionID, pr.BaseRevision, reactions.Patch{Name: &d.Name, Trigger: &d.Trigger, Steps: &d.Steps})
	if e := httpapi.AsError(err); err != nil && e.Code == "stale_revision" {
		current := e.Extensions["current_revision"]
		// Re-read: a concurrent apply of this very proposal moved the draft.
		if cur, lerr := s.load(ctx, p.AccountID, id); lerr == nil && cur.Status != StatusOpen {
			return Applied{}, decideErr(cur, nil)
		}
		now := stamp(s.now())
		pr.Status, pr.DecidedAt = StatusSuperseded, &now
		if serr := s.save(ctx, &pr); serr != nil {
			s.log.WarnContext(ctx, "copilot: marking a stale proposal superseded failed", "proposal_id", id, "error", serr)
		}
		return Applied{}, httpapi.Errorf(httpapi.KindConflict, "proposal_stale",
			"the reaction's draft moved past revision %d since the proposal was made; ask for a new proposal", pr.BaseRevision).
			With("base_revision", pr.BaseRevision).With("current_revision", current)
	}
	if err != nil {
		return Applied{}, err
	}
	now := stamp(s.now())
	rev := rx.Revision
	pr.Status, pr.DecidedAt, pr.AppliedRevision = StatusApplied, &now, &rev
	if err := s.save(ctx, &pr); err != nil {
		return Applied{}, err
	}
	s.supersede(ctx, pr)
	return Applied{Reaction: rx, Proposal: pr}, nil
}

// supersedeMax bounds the proposals one apply looks at to supersede.
const supersedeMax = 200

// supersede marks the reaction's other open proposals superseded: their base is gone. A
// failure is logged: applying them is refused anyway (proposal_stale).
func (s *Service) supersede(ctx context.Context, applied Proposal) {
	ctx = context.WithoutCancel(ctx)
	page, err := s.store.Query(ctx, store.Query{PK: proposalsPK(applied.BotID), Prefix: applied.ReactionID + "#", Reverse: true, Limit: supersedeMax})
	if err != nil {
		s.log.WarnContext(ctx, "copilot: listing proposals to supersede failed", "error", err)
		return
	}
	for _, it := range page.Items {
		pr, err := store.Decode[Proposal](it)
		if err != nil || pr.ID == applied.ID || pr.Status != StatusOpen {
			continue
		}
		now := stamp(s.now())
		pr.Status, pr.DecidedAt = StatusSuperseded, &now
		if err := s.save(ctx, &pr); err != nil {
			s.log.WarnContext(ctx, "copilot: superseding a proposal failed", "proposal_id", pr.ID, "error", err)
		}
	}
}
