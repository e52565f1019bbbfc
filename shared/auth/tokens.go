package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// PAT is a personal access token as listed: never its value.
type PAT struct {
	ID         string     `json:"id"`
	UserID     string     `json:"user_id"`
	Name       string     `json:"name"`
	Scopes     Scopes     `json:"scopes"`
	ExpiresAt  time.Time  `json:"expires_at"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// BotToken is a bot API token as listed: never its value.
type BotToken struct {
	ID          string     `json:"id"`
	BotID       string     `json:"bot_id"`
	Name        string     `json:"name"`
	MaskedValue string     `json:"masked_value"`
	CreatedAt   time.Time  `json:"created_at"`
	CreatedBy   string     `json:"created_by"`
	LastUsedAt  *time.Time `json:"last_used_at"`
}

// Stored forms: the listing record plus the hash that finds its credential.
type patRecord struct {
	PAT
	Hash string `json:"hash"`
}

type botTokenRecord struct {
	BotToken
	Hash string `json:"hash"`
}

// credential is what Authenticate reads: one item keyed by the token's hash.
type credential struct {
	Kind      TokenKind `json:"kind"`
	TokenID   string    `json:"token_id"`
	AccountID string    `json:"account_id"`
	UserID    string    `json:"user_id,omitempty"`
	BotID     string    `json:"bot_id,omitempty"`
	Scopes    Scopes    `json:"scopes,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// metaKey is the listing record of the credential's token.
func (c credential) metaKey() store.Key {
	if c.Kind == KindBot {
		return botTokenKey(c.AccountID, c.BotID, c.TokenID)
	}
	return patKey(c.AccountID, c.UserID, c.TokenID)
}

// MaxNameLen bounds token names.
const MaxNameLen = 100

// CheckName validates a token name and returns it trimmed.
func CheckName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", errors.New("name is required")
	case len([]rune(name)) > MaxNameLen:
		return "", fmt.Errorf("name must be at most %d characters", MaxNameLen)
	}
	if err := text.Check(name, text.Name); err != nil {
		return "", fmt.Errorf("name %w", err)
	}
	return name, nil
}

// CheckExpiry validates a PAT expiry against now: in the future and at most MaxPATLifetime
// away (a minute of slack absorbs client clock skew). The API additionally asks for at least a
// minute; operators (admin CLI) may mint shorter-lived tokens.
func CheckExpiry(expiresAt, now time.Time) error {
	switch {
	case expiresAt.IsZero():
		return fmt.Errorf("%w: expires_at is required", ErrInvalidExpiry)
	case !expiresAt.After(now):
		return fmt.Errorf("%w: expires_at must be in the future", ErrInvalidExpiry)
	case expiresAt.After(now.Add(MaxPATLifetime + time.Minute)):
		return fmt.Errorf("%w: expires_at must be at most 365 days away", ErrInvalidExpiry)
	}
	return nil
}

// CreatePAT mints a PAT for the creator's own user. The creator must be a PAT whose scopes
// cover the requested ones. It returns the listing record and the token value, which is
// never available again.
func (s *Service) CreatePAT(ctx context.Context, creator *Principal, name string, scopes Scopes, expiresAt time.Time) (PAT, string, error) {
	if creator.Kind != KindPAT {
		return PAT{}, "", ErrScopeTooBroad
	}
	if !creator.Scopes.Covers(scopes) {
		return PAT{}, "", ErrScopeTooBroad
	}
	return s.IssuePAT(ctx, creator.AccountID, creator.UserID, name, scopes, expiresAt)
}

// IssuePAT mints a PAT for any user of the account; it is the operator path (admin CLI)
// and the last step of CreatePAT.
func (s *Service) IssuePAT(ctx context.Context, account, user, name string, scopes Scopes, expiresAt time.Time) (PAT, string, error) {
	now := s.clock()
	name, err := CheckName(name)
	if err != nil {
		return PAT{}, "", fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	if scopes, err = ValidateScopes(scopes); err != nil {
		return PAT{}, "", fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	expiresAt = expiresAt.UTC().Truncate(time.Second)
	if err := CheckExpiry(expiresAt, now); err != nil {
		return PAT{}, "", err
	}
	tok := NewToken(KindPAT)
	rec := patRecord{
		PAT:  PAT{ID: ids.At("pat", now), UserID: user, Name: name, Scopes: scopes, ExpiresAt: expiresAt, CreatedAt: stamp(now)},
		Hash: HashToken(tok),
	}
	cred := credential{Kind: KindPAT, TokenID: rec.ID, AccountID: account, UserID: user, Scopes: scopes, ExpiresAt: expiresAt}
	// Both records vanish a while after expiry; until then listing shows the token as expired.
	writes, err := tokenWrites(patKey(account, user, rec.ID), rec, rec.Hash, cred, expiresAt.Add(credentialGrace))
	if err != nil {
		return PAT{}, "", err
	}
	// The counter moves in the token's transaction under a revision condition: of
	// concurrent creations that read the same count, one commits and the others read again.
	err = store.Counted(ctx, s.store, patCountKey(account, user), +1, func(c store.Counter) error {
		if !c.Exists || c.Count >= MaxPATsPerUser {
			// A missing counter (PATs issued before it existed) starts from a count, and a
			// full one is recounted: an expired PAT vanishes without moving it.
			live, err := s.livePATs(ctx, account, user, now)
			if err != nil {
				return err
			}
			if live >= MaxPATsPerUser {
				return ErrLimitReached
			}
			c = c.Set(live + 1)
		}
		all := append(append([]store.Write{c.Write}, writes...), store.CheckOp(userKey(account, user), store.MustExist))
		err := s.store.Transact(ctx, all)
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index == len(all)-1 {
			return ErrNotFound // the user is gone
		}
		return err
	})
	if errors.Is(err, ErrLimitReached) || errors.Is(err, ErrNotFound) {
		return PAT{}, "", err
	}
	if err != nil {
		return PAT{}, "", fmt.Errorf("write token: %w", err)
	}
	return rec.PAT, tok, nil
}

// patCountKey holds how many live PATs a user has: PATs issued and not revoked, including
// some that have expired since (their records vanish without moving it). IssuePAT recounts
// when it says the limit is reached, so it can only be too high, never too low, and never
// for long.
func patCountKey(account, user string) store.Key {
	return store.Key{PK: accountPK(account), SK: "PATCOUNT#" + user}
}

// livePATs counts the user's PATs that have not expired at now.
func (s *Service) livePATs(ctx context.Context, account, user string, now time.Time) (int64, error) {
	q := store.Query{PK: accountPK(account), Prefix: "PAT#" + user + "#"}
	var n int64
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return 0, err
		}
		for _, it := range page.Items {
			rec, err := store.Decode[patRecord](it)
			if err != nil {
				return 0, err
			}
			if rec.ExpiresAt.After(now) {
				n++
			}
		}
		if page.Next == "" {
			return n, nil
		}
		q.Cursor = page.Next
	}
}

// tokenWrites returns the two writes that create a token: its listing record and its credential.
func tokenWrites(meta store.Key, rec any, hash string, cred credential, expires time.Time) ([]store.Write, error) {
	rb, err := store.Encode(rec)
	if err != nil {
		return nil, err
	}
	cb, err := store.Encode(cred)
	if err != nil {
		return nil, err
	}
	return []store.Write{
		store.PutOp(store.Item{Key: meta, Data: rb, Revision: 1, ExpiresAt: expires}, store.MustNotExist),
		store.PutOp(store.Item{Key: credentialKey(hash), Data: cb, Revision: 1, ExpiresAt: expires}, store.MustNotExist),
	}, nil
}

// ListPATs returns one page of the user's PATs, oldest first.
func (s *Service) ListPATs(ctx context.Context, account, user string, limit int, cursor string) ([]PAT, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: accountPK(account), Prefix: "PAT#" + user + "#", Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]PAT, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[patRecord](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.PAT)
	}
	return out, page.Next, nil
}

// RevokePAT deletes one of the user's PATs; it stops working at once on this process and
// within CacheTTL everywhere.
func (s *Service) RevokePAT(ctx context.Context, account, user, id string) error {
	if !ids.Valid("pat", id) {
		return ErrNotFound
	}
	key := patKey(account, user, id)
	it, err := s.store.Get(ctx, key)
	if err != nil {
		return notFound(err)
	}
	rec, err := store.Decode[patRecord](it)
	if err != nil {
		return err
	}
	defer s.cache.forget(rec.Hash)
	deletes := []store.Write{
		store.DeleteOp(key, store.MustExist),
		store.DeleteOp(credentialKey(rec.Hash), store.Always),
	}
	// Only a live PAT gives its place back: an expired one may already be left out of the
	// count (a recount skips it), and a count too low would let the limit be passed.
	if !rec.ExpiresAt.After(s.clock()) {
		return mapRevokeErr(s.store.Transact(ctx, deletes))
	}
	return store.Counted(ctx, s.store, patCountKey(account, user), -1, func(c store.Counter) error {
		if !c.Exists {
			// No counter yet: the next issue counts the PATs there are.
			return mapRevokeErr(s.store.Transact(ctx, deletes))
		}
		err := s.store.Transact(ctx, append([]store.Write{c.Write}, deletes...))
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index == 1 {
			return ErrNotFound // revoked concurrently
		}
		return err
	})
}

// mapRevokeErr is the answer of a revocation's transaction without a counter.
func mapRevokeErr(err error) error {
	if err != nil {
		return fmt.Errorf("revoke token: %w", mapCond(err))
	}
	return nil
}

// IssueBotToken mints a bot API token bound to bot. guards are extra transaction writes
// (a check that the bot still exists) that must hold for the token to be written.
func (s *Service) IssueBotToken(ctx context.Context, account, bot, createdBy, name string, guards ...store.Write) (BotToken, string, error) {
	name, err := CheckName(name)
	if err != nil {
		return BotToken{}, "", fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	tok := NewToken(KindBot)
	now := s.clock()
	rec := botTokenRecord{
		BotToken: BotToken{ID: ids.At("btk", now), BotID: bot, Name: name, MaskedValue: MaskToken(tok), CreatedAt: stamp(now), CreatedBy: createdBy},
		Hash:     HashToken(tok),
	}
	cred := credential{Kind: KindBot, TokenID: rec.ID, AccountID: account, BotID: bot}
	writes, err := tokenWrites(botTokenKey(account, bot, rec.ID), rec, rec.Hash, cred, time.Time{})
	if err != nil {
		return BotToken{}, "", err
	}
	err = store.Counted(ctx, s.store, botTokenCountKey(account, bot), +1, func(c store.Counter) error {
		if c.Count >= MaxBotTokensPerBot {
			return ErrLimitReached
		}
		all := append(append([]store.Write{c.Write}, writes...), guards...)
		err := s.store.Transact(ctx, all)
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index > len(writes) {
			return ErrNotFound // a guard failed: the bot is gone
		}
		return err
	})
	if err != nil {
		return BotToken{}, "", err
	}
	return rec.BotToken, tok, nil
}

// botTokenCountKey holds how many API tokens a bot has. Issuing and revoking move it in the
// token's own transaction under a revision condition, so the limit holds under concurrency
// and deleting the bot always finds every token within one transaction.
func botTokenCountKey(account, bot string) store.Key {
	return store.Key{PK: accountPK(account), SK: "BOTTOKENCOUNT#" + bot}
}

// ListBotTokens returns one page of the bot's tokens, oldest first.
func (s *Service) ListBotTokens(ctx context.Context, account, bot string, limit int, cursor string) ([]BotToken, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: accountPK(account), Prefix: "BOTTOKEN#" + bot + "#", Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]BotToken, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[botTokenRecord](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.BotToken)
	}
	return out, page.Next, nil
}

// RevokeBotToken deletes a bot token; it stops working at once on this process.
func (s *Service) RevokeBotToken(ctx context.Context, account, bot, id string) error {
	if !ids.Valid("btk", id) {
		return ErrNotFound
	}
	key := botTokenKey(account, bot, id)
	it, err := s.store.Get(ctx, key)
	if err != nil {
		return notFound(err)
	}
	rec, err := store.Decode[botTokenRecord](it)
	if err != nil {
		return err
	}
	defer s.cache.forget(rec.Hash)
	return store.Counted(ctx, s.store, botTokenCountKey(account, bot), -1, func(c store.Counter) error {
		err := s.store.Transact(ctx, []store.Write{
			c.Write,
			store.DeleteOp(key, store.MustExist),
			store.DeleteOp(credentialKey(rec.Hash), store.Always),
		})
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index == 1 {
			return ErrNotFound // revoked concurrently
		}
		return err
	})
}

// BotTokenDeletes returns the writes that delete every token of bot, for the bot's own
// deletion transaction, and a function to call once that transaction committed. The first
// write is conditioned on the bot's token counter as read before the tokens were listed: a
// token issued or revoked since then fails the transaction at that write, and the caller
// lists again (calls BotTokenDeletes anew) instead of leaving a token of a deleted bot behind.
func (s *Service) BotTokenDeletes(ctx context.Context, account, bot string) ([]store.Write, func(), error) {
	countKey := botTokenCountKey(account, bot)
	count := store.CheckOp(countKey, store.MustNotExist)
	it, err := s.store.Get(ctx, countKey)
	switch {
	case err == nil:
		count = store.DeleteOp(countKey, store.RevisionIs(it.Revision))
	case !errors.Is(err, store.ErrNotFound):
		return nil, nil, err
	}
	page, err := s.store.Query(ctx, store.Query{PK: accountPK(account), Prefix: "BOTTOKEN#" + bot + "#", Limit: MaxBotTokensPerBot + 1})
	if err != nil {
		return nil, nil, err
	}
	writes := []store.Write{count}
	var hashes []string
	for _, it := range page.Items {
		rec, err := store.Decode[botTokenRecord](it)
		if err != nil {
			return nil, nil, err
		}
		writes = append(writes, store.DeleteOp(it.Key, store.Always), store.DeleteOp(credentialKey(rec.Hash), store.Always))
		hashes = append(hashes, rec.Hash)
	}
	return writes, func() {
		for _, h := range hashes {
			s.cache.forget(h)
		}
	}, nil
}
