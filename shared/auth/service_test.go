package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

func TestCreateAccountAndUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()

	assert.True(t, ids.Valid("acct", f.acct.ID))
	assert.True(t, ids.Valid("usr", f.owner.ID))
	assert.Equal(t, "Acme", f.acct.Name)
	assert.Equal(t, f.owner.ID, f.acct.OwnerUserID)
	assert.Equal(t, f.acct.ID, f.owner.AccountID)
	assert.Equal(t, RoleOwner, f.owner.Role)
	assert.Equal(t, AllRightsSet, f.owner.Rights)
	assert.Equal(t, t0, f.acct.CreatedAt)

	got, err := f.svc.Account(ctx, f.acct.ID)
	require.NoError(t, err)
	assert.Equal(t, f.acct, got)
	owner, err := f.svc.User(ctx, f.acct.ID, f.owner.ID)
	require.NoError(t, err)
	assert.Equal(t, f.owner, owner)

	_, err = f.svc.Account(ctx, ids.At("acct", t0))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = f.svc.User(ctx, f.acct.ID, ids.At("usr", t0))
	assert.ErrorIs(t, err, ErrNotFound)

	for _, name := range []string{"", "   "} {
		_, _, err := f.svc.CreateAccount(ctx, name)
		assert.ErrorIs(t, err, ErrInvalidRequest, "%q", name)
	}

	m, err := f.svc.CreateUser(ctx, f.acct.ID, "", RightsOf(RightDialogs))
	require.NoError(t, err)
	assert.Equal(t, RoleMember, m.Role)
	assert.Equal(t, "Member", m.Name, "a nameless member gets a default name")
	assert.Equal(t, RightsOf(RightDialogs), m.Rights)
	stored, err := f.svc.User(ctx, f.acct.ID, m.ID)
	require.NoError(t, err)
	assert.Equal(t, m, stored)

	_, err = f.svc.CreateUser(ctx, ids.At("acct", t0), "Ann", 0)
	assert.ErrorIs(t, err, ErrNotFound, "a user needs an existing account")
}

func TestIssuePATValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := f.clock.Now()
	day := 24 * time.Hour
	tests := []struct {
		name    string
		user    string
		tokName string
		scopes  Scopes
		expires time.Time
		wantErr error
	}{
		{"ok", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(day), nil},
		{"name trimmed", f.owner.ID, "  ci  ", Scopes{"bots:read"}, now.Add(day), nil},
		{"name of 100 runes", f.owner.ID, strings.Repeat("é", 100), Scopes{"bots:read"}, now.Add(day), nil},
		{"name of 101 runes", f.owner.ID, strings.Repeat("é", 101), Scopes{"bots:read"}, now.Add(day), ErrInvalidRequest},
		{"empty name", f.owner.ID, "", Scopes{"bots:read"}, now.Add(day), ErrInvalidRequest},
		{"blank name", f.owner.ID, " \t ", Scopes{"bots:read"}, now.Add(day), ErrInvalidRequest},
		{"no scopes", f.owner.ID, "ci", nil, now.Add(day), ErrInvalidRequest},
		{"unknown scope", f.owner.ID, "ci", Scopes{"bots:delete"}, now.Add(day), ErrInvalidRequest},
		{"duplicate scope", f.owner.ID, "ci", Scopes{"bots:read", "bots:read"}, now.Add(day), ErrInvalidRequest},
		{"no expiry", f.owner.ID, "ci", Scopes{"bots:read"}, time.Time{}, ErrInvalidExpiry},
		{"expired yesterday", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(-day), ErrInvalidExpiry},
		{"expires now", f.owner.ID, "ci", Scopes{"bots:read"}, now, ErrInvalidExpiry},
		{"expires within the second", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(500 * time.Millisecond), ErrInvalidExpiry},
		// The operator path (admin CLI) may mint short-lived tokens; the API asks for a
		// minute (see functions/pats).
		{"expires in a second", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(time.Second), nil},
		{"exactly 365 days", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(365 * day), nil},
		{"365 days and the minute of slack", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(365*day + time.Minute), nil},
		{"past the slack", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(365*day + time.Minute + time.Second), ErrInvalidExpiry},
		{"366 days", f.owner.ID, "ci", Scopes{"bots:read"}, now.Add(366 * day), ErrInvalidExpiry},
		{"unknown user", ids.At("usr", now), "ci", Scopes{"bots:read"}, now.Add(day), ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pat, tok, err := f.svc.IssuePAT(t.Context(), f.acct.ID, tt.user, tt.tokName, tt.scopes, tt.expires)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Empty(t, tok)
				return
			}
			require.NoError(t, err)
			kind, ok := ParseToken(tok)
			require.True(t, ok)
			assert.Equal(t, KindPAT, kind)
			assert.True(t, ids.Valid("pat", pat.ID))
			assert.Equal(t, strings.TrimSpace(tt.tokName), pat.Name)
			assert.Equal(t, tt.user, pat.UserID)
			assert.Equal(t, tt.expires.Truncate(time.Second), pat.ExpiresAt)
			assert.Equal(t, now, pat.CreatedAt)
			assert.Nil(t, pat.LastUsedAt)
		})
	}
}

func TestIssuePATNormalizesAndNeverStoresTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	exp := f.clock.Now().Add(time.Hour + 1500*time.Millisecond)
	pat, tok, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "ci", Scopes{"crm:read", "bots:*"}, exp)
	require.NoError(t, err)
	assert.Equal(t, Scopes{"bots:*", "crm:read"}, pat.Scopes, "scopes are stored sorted")
	assert.Equal(t, exp.Truncate(time.Second), pat.ExpiresAt, "expiry kept to the second")

	b, err := json.Marshal(pat)
	require.NoError(t, err)
	assert.NotContains(t, string(b), tok)
	assert.NotContains(t, string(b), "hash")

	// Neither stored record holds the token; the credential is found by its hash only.
	meta, err := f.raw.Get(ctx, patKey(f.acct.ID, f.owner.ID, pat.ID))
	require.NoError(t, err)
	cred, err := f.raw.Get(ctx, credentialKey(HashToken(tok)))
	require.NoError(t, err)
	for _, it := range []store.Item{meta, cred} {
		assert.NotContains(t, string(it.Data), tok[4:34])
		assert.Equal(t, pat.ExpiresAt.Add(credentialGrace), it.ExpiresAt, "records age out after the grace period")
	}
}

func TestIssuePATLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	exp := f.clock.Now().Add(time.Hour)
	var first PAT
	for i := range MaxPATsPerUser {
		p, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, fmt.Sprint("t", i), Scopes{"bots:read"}, exp)
		require.NoError(t, err, i)
		if i == 0 {
			first = p
		}
	}
	_, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "one too many", Scopes{"bots:read"}, exp)
	require.ErrorIs(t, err, ErrLimitReached)

	// The cap is per user.
	m, err := f.svc.CreateUser(ctx, f.acct.ID, "Ann", 0)
	require.NoError(t, err)
	_, _, err = f.svc.IssuePAT(ctx, f.acct.ID, m.ID, "ann's", Scopes{"bots:read"}, exp)
	require.NoError(t, err)

	// Revoking one frees a slot.
	require.NoError(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, first.ID))
	_, _, err = f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "replacement", Scopes{"bots:read"}, exp)
	require.NoError(t, err)
}

// 150 concurrent creations for one user: exactly 100 tokens exist afterwards. (Read, then
// write, as the limit once was, let all 150 through.) A creation that kept losing the
// counter's race answers ErrUnavailable, the API's 503, and is retried as a client would.
func TestIssuePATLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	exp := f.clock.Now().Add(time.Hour)
	issue := func(i int) error {
		_, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, fmt.Sprint("t", i), Scopes{"bots:read"}, exp)
		return err
	}
	errs := make([]error, 150)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range errs {
		wg.Go(func() { <-begin; errs[i] = issue(i) })
	}
	close(begin)
	wg.Wait()
	created, limited := 0, 0
	for i, err := range errs {
		if errors.Is(err, store.ErrUnavailable) {
			err = issue(i)
		}
		switch {
		case err == nil:
			created++
		case errors.Is(err, ErrLimitReached):
			limited++
		default:
			t.Errorf("creation %d: %v", i, err)
		}
	}
	assert.Equal(t, MaxPATsPerUser, created)
	assert.Equal(t, 150-MaxPATsPerUser, limited)
	all := listAll(t, f)
	assert.Len(t, all, MaxPATsPerUser, "tokens stored")
}

// Expired PATs give their places back although nothing moves the counter when they expire
// (their records vanish later, by TTL): at the limit, the count is taken again.
func TestIssuePATLimitFreesExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	soon, later := f.clock.Now().Add(time.Hour), f.clock.Now().Add(48*time.Hour)
	var short []PAT
	for i := range MaxPATsPerUser {
		exp := later
		if i < 10 {
			exp = soon
		}
		p, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, fmt.Sprint("t", i), Scopes{"bots:read"}, exp)
		require.NoError(t, err, i)
		if i < 10 {
			short = append(short, p)
		}
	}
	_, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "full", Scopes{"bots:read"}, later)
	require.ErrorIs(t, err, ErrLimitReached)

	f.clock.Advance(2 * time.Hour) // ten have expired (still listed, within their grace)
	// Revoking an expired one gives back no place: it is no longer counted.
	require.NoError(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, short[0].ID))
	for i := range 10 {
		_, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, fmt.Sprint("new", i), Scopes{"bots:read"}, later)
		require.NoError(t, err, "place %d of an expired token", i)
	}
	_, _, err = f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "full again", Scopes{"bots:read"}, later)
	require.ErrorIs(t, err, ErrLimitReached, "ninety live and ten new: full")
	it, err := f.raw.Get(ctx, patCountKey(f.acct.ID, f.owner.ID))
	require.NoError(t, err)
	assert.EqualValues(t, MaxPATsPerUser, it.Count, "the counter was repaired to the live count")
}

// A user whose PATs were issued before the counter existed: the first creation counts them.
func TestIssuePATLimitWithoutCounter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	exp := f.clock.Now().Add(time.Hour)
	for i := range MaxPATsPerUser {
		_, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, fmt.Sprint("t", i), Scopes{"bots:read"}, exp)
		require.NoError(t, err)
	}
	require.NoError(t, f.raw.Delete(ctx, patCountKey(f.acct.ID, f.owner.ID), store.MustExist))
	_, _, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "over", Scopes{"bots:read"}, exp)
	require.ErrorIs(t, err, ErrLimitReached)

	all := listAll(t, f)
	require.NoError(t, f.raw.Delete(ctx, patCountKey(f.acct.ID, f.owner.ID), store.Always))
	require.NoError(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, all[0].ID), "revoking without a counter")
	_, _, err = f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "in", Scopes{"bots:read"}, exp)
	require.NoError(t, err)
	_, _, err = f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "over", Scopes{"bots:read"}, exp)
	require.ErrorIs(t, err, ErrLimitReached)
}

func listAll(t *testing.T, f *fixture) []PAT {
	t.Helper()
	var all []PAT
	cursor := ""
	for {
		page, next, err := f.svc.ListPATs(t.Context(), f.acct.ID, f.owner.ID, 200, cursor)
		require.NoError(t, err)
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

func TestCreatePAT(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	exp := f.clock.Now().Add(time.Hour)
	patCreator := func(scopes ...Scope) *Principal {
		return &Principal{AccountID: f.acct.ID, UserID: f.owner.ID, Kind: KindPAT, Scopes: scopes, Role: RoleOwner}
	}
	tests := []struct {
		name    string
		creator *Principal
		want    Scopes
		wantErr error
	}{
		{"full mints full", patCreator(Full), Scopes{Full}, nil},
		{"full mints anything", patCreator(Full), Scopes{"crm:*", "managed_ai:usage:read"}, nil},
		{"narrower", patCreator("bots:*"), Scopes{"bots:read"}, nil},
		{"same", patCreator("bots:read", "crm:read"), Scopes{"bots:read", "crm:read"}, nil},
		{"wildcard holder cannot mint full", patCreator("bots:*"), Scopes{Full}, ErrScopeTooBroad},
		{"wildcard holder cannot mint another resource", patCreator("bots:*"), Scopes{"crm:read"}, ErrScopeTooBroad},
		{"actions do not mint the wildcard", patCreator("bots:read", "bots:write"), Scopes{"bots:*"}, ErrScopeTooBroad},
		{"one too broad among several", patCreator("bots:read"), Scopes{"bots:read", "bots:write"}, ErrScopeTooBroad},
		{"bot tokens never mint PATs", &Principal{AccountID: f.acct.ID, Kind: KindBot, BotID: "bot_x", Scopes: Scopes{Full}}, Scopes{"bots:read"}, ErrScopeTooBroad},
		{"invalid scopes still rejected", patCreator(Full), Scopes{"nope:read"}, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pat, tok, err := f.svc.CreatePAT(t.Context(), tt.creator, "minted", tt.want, exp)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Empty(t, tok)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.creator.UserID, pat.UserID, "a PAT is always for the creator's own user")
			p, err := f.svc.Authenticate(t.Context(), bearer(tok))
			require.NoError(t, err)
			assert.Equal(t, f.acct.ID, p.AccountID)
			assert.ElementsMatch(t, tt.want, p.Scopes)
		})
	}
}

func TestAuthenticateRejects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, good := f.pat(t)

	// A well-formed PAT whose credential record claims to be a bot token.
	wrongKind := NewToken(KindPAT)
	cb, err := store.Encode(credential{Kind: KindBot, TokenID: ids.At("btk", t0), AccountID: f.acct.ID, BotID: ids.At("bot", t0)})
	require.NoError(t, err)
	require.NoError(t, f.raw.Put(ctx, store.Item{Key: credentialKey(HashToken(wrongKind)), Data: cb, Revision: 1}, store.MustNotExist))

	tests := []struct {
		name      string
		header    string
		wantErr   error
		storeRead bool
	}{
		{"missing header", "", ErrMissingCredentials, false},
		{"basic scheme", "Basic " + good, ErrMalformedToken, false},
		{"token without scheme", good, ErrMalformedToken, false},
		{"scheme without token", "Bearer", ErrMalformedToken, false},
		{"empty token", "Bearer ", ErrMalformedToken, false},
		{"garbage", "Bearer hello", ErrMalformedToken, false},
		{"one character changed", bearer(good[:20] + flip(good[20]) + good[21:]), ErrMalformedToken, false},
		{"unknown PAT", bearer(NewToken(KindPAT)), ErrUnknownToken, true},
		{"unknown bot token", bearer(NewToken(KindBot)), ErrUnknownToken, true},
		{"wrong kind", bearer(wrongKind), ErrUnknownToken, true},
		{"an SDK installation token", bearer(NewToken(KindInstallation)), ErrUnknownToken, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: each case counts the store reads it causes.
			f.store.reset()
			p, err := f.svc.Authenticate(ctx, tt.header)
			require.ErrorIs(t, err, tt.wantErr)
			assert.Nil(t, p)
			if tt.storeRead {
				assert.Positive(t, f.store.gets.Load())
			} else {
				assert.Zero(t, f.store.gets.Load(), "refused before any lookup")
			}
		})
	}

	// The scheme is case-insensitive and surrounding space is tolerated.
	for _, h := range []string{"bearer " + good, "BEARER " + good, "Bearer  " + good + " "} {
		_, err := f.svc.Authenticate(ctx, h)
		assert.NoError(t, err, h)
	}
}

// flip returns another base62 character than c.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func TestAuthenticatePrincipal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()

	pat, tok := f.pat(t, "bots:read", "crm:*")
	p, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.Equal(t, &Principal{
		AccountID: f.acct.ID, UserID: f.owner.ID, TokenID: pat.ID, Kind: KindPAT,
		Scopes: Scopes{"bots:read", "crm:*"}, Role: RoleOwner, Rights: AllRightsSet, ExpiresAt: pat.ExpiresAt,
	}, p)

	m, err := f.svc.CreateUser(ctx, f.acct.ID, "Ann", RightsOf(RightAnalytics))
	require.NoError(t, err)
	mpat, mtok, err := f.svc.IssuePAT(ctx, f.acct.ID, m.ID, "ann", Scopes{"bots:read"}, t0.Add(time.Hour))
	require.NoError(t, err)
	p, err = f.svc.Authenticate(ctx, bearer(mtok))
	require.NoError(t, err)
	assert.Equal(t, m.ID, p.UserID)
	assert.Equal(t, mpat.ID, p.TokenID)
	assert.Equal(t, RoleMember, p.Role)
	assert.Equal(t, RightsOf(RightAnalytics), p.Rights)

	bot := ids.At("bot", t0)
	bt, btok, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "widget")
	require.NoError(t, err)
	p, err = f.svc.Authenticate(ctx, bearer(btok))
	require.NoError(t, err)
	assert.Equal(t, &Principal{
		AccountID: f.acct.ID, TokenID: bt.ID, Kind: KindBot, BotID: bot,
		Scopes: Scopes{Full}, Role: RoleMember,
	}, p)
	assert.True(t, p.ExpiresAt.IsZero(), "bot tokens live until deleted")
}

func TestAuthenticateExpiry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, tok, err := f.svc.IssuePAT(ctx, f.acct.ID, f.owner.ID, "short", Scopes{"bots:read"}, t0.Add(2*time.Minute))
	require.NoError(t, err)

	_, err = f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	f.clock.Advance(2*time.Minute - time.Second)
	_, err = f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err, "valid until the last second")

	f.clock.Advance(time.Second)
	_, err = f.svc.Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrExpiredToken, "the cached principal expires too")

	fresh := NewService(f.store, f.clock.Now, nil)
	_, err = fresh.Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrExpiredToken, "another process, without a cache, says expired too")

	f.clock.Advance(credentialGrace)
	_, err = NewService(f.store, f.clock.Now, nil).Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrUnknownToken, "after the grace period the credential is gone")
	pats, _, err := f.svc.ListPATs(ctx, f.acct.ID, f.owner.ID, 10, "")
	require.NoError(t, err)
	assert.Empty(t, pats, "and so is its listing")
}

func TestRevokePAT(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	pat, tok := f.pat(t)
	other := NewService(f.store, f.clock.Now, nil) // another process on the same store

	_, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	_, err = other.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)

	require.NoError(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, pat.ID))
	_, err = f.svc.Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrUnknownToken, "this process forgets the cached principal at once")

	_, err = other.Authenticate(ctx, bearer(tok))
	require.NoError(t, err, "another process may keep it for CacheTTL")
	f.clock.Advance(CacheTTL)
	_, err = other.Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrUnknownToken, "but no longer")

	pats, _, err := f.svc.ListPATs(ctx, f.acct.ID, f.owner.ID, 10, "")
	require.NoError(t, err)
	assert.Empty(t, pats)

	require.ErrorIs(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, pat.ID), ErrNotFound, "twice")

	// Another user of the account cannot revoke the owner's token.
	pat2, tok2 := f.pat(t)
	m, err := f.svc.CreateUser(ctx, f.acct.ID, "Ann", 0)
	require.NoError(t, err)
	require.ErrorIs(t, f.svc.RevokePAT(ctx, f.acct.ID, m.ID, pat2.ID), ErrNotFound)
	require.ErrorIs(t, f.svc.RevokePAT(ctx, ids.At("acct", t0), f.owner.ID, pat2.ID), ErrNotFound)
	_, err = f.svc.Authenticate(ctx, bearer(tok2))
	require.NoError(t, err)

	f.store.reset()
	require.ErrorIs(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, "pat_nope"), ErrNotFound)
	require.ErrorIs(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, ids.At("btk", t0)), ErrNotFound)
	assert.Zero(t, f.store.gets.Load(), "a malformed id is refused without a lookup")
}

// A revocation that commits while Authenticate is reading the store must still take
// effect at once on this process: the read from before it must not be cached.
func TestRevokeDuringAuthenticateIsNotCached(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	pat, tok := f.pat(t)

	uk := userKey(f.acct.ID, f.owner.ID)
	reading, proceed := make(chan struct{}), make(chan struct{})
	hook := func(k store.Key) {
		if k == uk {
			close(reading)
			<-proceed
		}
	}
	f.store.afterGet.Store(&hook)
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.Authenticate(ctx, bearer(tok))
		done <- err
	}()
	<-reading // Authenticate has read the credential and the user
	f.store.afterGet.Store(nil)
	require.NoError(t, f.svc.RevokePAT(ctx, f.acct.ID, f.owner.ID, pat.ID))
	close(proceed)
	require.NoError(t, <-done, "the in-flight request read a valid token")

	_, err := f.svc.Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrUnknownToken, "the next request sees the revocation")
}

func TestAuthenticateUserDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	m, err := f.svc.CreateUser(ctx, f.acct.ID, "Ann", 0)
	require.NoError(t, err)
	_, tok, err := f.svc.IssuePAT(ctx, f.acct.ID, m.ID, "ann", Scopes{"bots:read"}, t0.Add(time.Hour))
	require.NoError(t, err)
	_, err = f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)

	require.NoError(t, f.raw.Delete(ctx, userKey(f.acct.ID, m.ID), store.MustExist))
	f.clock.Advance(CacheTTL)
	_, err = f.svc.Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrUnknownToken, "a removed user's tokens die with it")
}

func TestAuthenticateCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, tok := f.pat(t)

	_, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)

	f.store.reset()
	f.clock.Advance(CacheTTL - time.Second)
	p1, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.Zero(t, f.store.gets.Load(), "within CacheTTL the store is not read")

	f.clock.Advance(time.Second)
	p2, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.Equal(t, int64(3), f.store.gets.Load(), "after CacheTTL the credential, the account and the user are read again")
	assert.Equal(t, p1, p2)
	assert.Zero(t, f.store.puts.Load(), "and last_used_at is not due yet")
}

func TestLastUsedAt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	pat, tok := f.pat(t)
	lastUsed := func() *time.Time {
		t.Helper()
		pats, _, err := f.svc.ListPATs(ctx, f.acct.ID, f.owner.ID, 10, "")
		require.NoError(t, err)
		require.Len(t, pats, 1)
		require.Equal(t, pat.ID, pats[0].ID)
		return pats[0].LastUsedAt
	}
	require.Nil(t, lastUsed(), "never used")

	f.store.reset()
	_, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.Equal(t, int64(1), f.store.puts.Load(), "first use is recorded")
	require.NotNil(t, lastUsed())
	assert.Equal(t, t0, *lastUsed())

	steps := []struct {
		advance time.Duration
		puts    int64
		want    time.Time
	}{
		{time.Second, 0, t0},
		{CacheTTL, 0, t0}, // cache expired, store read, still within the minute
		{time.Minute - CacheTTL - 2*time.Second, 0, t0}, // t0+59s
		{time.Second, 1, t0.Add(time.Minute)},           // a minute on: written again
		{30 * time.Second, 0, t0.Add(time.Minute)},
	}
	for i, s := range steps {
		f.clock.Advance(s.advance)
		f.store.reset()
		_, err := f.svc.Authenticate(ctx, bearer(tok))
		require.NoError(t, err)
		assert.Equal(t, s.puts, f.store.puts.Load(), "step %d", i)
		assert.Equal(t, s.want, *lastUsed(), "step %d", i)
	}

	// Another process that has never seen the token reads the record but does not rewrite
	// a use recorded less than a minute ago.
	other := NewService(f.store, f.clock.Now, nil)
	f.store.reset()
	_, err = other.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.Zero(t, f.store.puts.Load())

	// Bookkeeping keeps the record's expiry: the listing still ages out.
	f.clock.Advance(30*24*time.Hour + credentialGrace)
	pats, _, err := f.svc.ListPATs(ctx, f.acct.ID, f.owner.ID, 10, "")
	require.NoError(t, err)
	assert.Empty(t, pats)
}

func TestListPATsPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	var want []string
	for range 5 {
		p, _ := f.pat(t)
		want = append(want, p.ID)
	}
	var got []string
	cursor := ""
	for {
		page, next, err := f.svc.ListPATs(ctx, f.acct.ID, f.owner.ID, 2, cursor)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		for _, p := range page {
			got = append(got, p.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	assert.ElementsMatch(t, want, got)

	m, err := f.svc.CreateUser(ctx, f.acct.ID, "Ann", 0)
	require.NoError(t, err)
	pats, _, err := f.svc.ListPATs(ctx, f.acct.ID, m.ID, 10, "")
	require.NoError(t, err)
	assert.Empty(t, pats, "users see only their own tokens")
}

var maskedRe = regexp.MustCompile(`^mbb_\*{8}[0-9A-Za-z]{4}$`)

func TestBotTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	bot, otherBot := ids.At("bot", t0), ids.At("bot", t0.Add(time.Second))

	bt, tok, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "  widget  ")
	require.NoError(t, err)
	kind, ok := ParseToken(tok)
	require.True(t, ok)
	assert.Equal(t, KindBot, kind)
	assert.True(t, ids.Valid("btk", bt.ID))
	assert.Equal(t, "widget", bt.Name)
	assert.Equal(t, bot, bt.BotID)
	assert.Equal(t, f.owner.ID, bt.CreatedBy)
	assert.Equal(t, t0, bt.CreatedAt)
	assert.Equal(t, MaskToken(tok), bt.MaskedValue)
	assert.Regexp(t, maskedRe, bt.MaskedValue)
	assert.Equal(t, tok[len(tok)-4:], bt.MaskedValue[len(bt.MaskedValue)-4:])

	list, next, err := f.svc.ListBotTokens(ctx, f.acct.ID, bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, list, 1)
	assert.Equal(t, bt, list[0])
	b, err := json.Marshal(list)
	require.NoError(t, err)
	assert.NotContains(t, string(b), tok[4:34], "listing never shows the secret")
	assert.NotContains(t, string(b), HashToken(tok))

	list, _, err = f.svc.ListBotTokens(ctx, f.acct.ID, otherBot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, list, "tokens are listed per bot")

	p, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.Equal(t, bot, p.BotID)

	// last_used_at works for bot tokens too.
	list, _, err = f.svc.ListBotTokens(ctx, f.acct.ID, bot, 10, "")
	require.NoError(t, err)
	require.NotNil(t, list[0].LastUsedAt)
	assert.Equal(t, t0, *list[0].LastUsedAt)

	require.ErrorIs(t, f.svc.RevokeBotToken(ctx, f.acct.ID, otherBot, bt.ID), ErrNotFound, "revoked only under its own bot")
	require.ErrorIs(t, f.svc.RevokeBotToken(ctx, f.acct.ID, bot, "btk_bad"), ErrNotFound)
	require.NoError(t, f.svc.RevokeBotToken(ctx, f.acct.ID, bot, bt.ID))
	_, err = f.svc.Authenticate(ctx, bearer(tok))
	require.ErrorIs(t, err, ErrUnknownToken, "revoked at once despite the cache")
	require.ErrorIs(t, f.svc.RevokeBotToken(ctx, f.acct.ID, bot, bt.ID), ErrNotFound)

	for _, name := range []string{"", "  ", strings.Repeat("x", MaxNameLen+1)} {
		_, _, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, name)
		require.ErrorIs(t, err, ErrInvalidRequest, "%q", name)
	}

	// A failing guard (the bot is gone) writes nothing.
	gone := store.CheckOp(store.Key{PK: "ACCT#" + f.acct.ID, SK: "BOT#" + bot}, store.MustExist)
	_, _, err = f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "late", gone)
	require.ErrorIs(t, err, ErrNotFound)
	list, _, err = f.svc.ListBotTokens(ctx, f.acct.ID, bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestBotTokenLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	bot, otherBot := ids.At("bot", t0), ids.At("bot", t0.Add(time.Second))
	for i := range MaxBotTokensPerBot {
		_, _, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, fmt.Sprint("t", i))
		require.NoError(t, err, i)
	}
	_, _, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "one too many")
	require.ErrorIs(t, err, ErrLimitReached)
	_, _, err = f.svc.IssueBotToken(ctx, f.acct.ID, otherBot, f.owner.ID, "other bot")
	require.NoError(t, err, "the cap is per bot")

	// Revoking one frees a slot, for one token only.
	list, _, err := f.svc.ListBotTokens(ctx, f.acct.ID, bot, 1, "")
	require.NoError(t, err)
	require.NoError(t, f.svc.RevokeBotToken(ctx, f.acct.ID, bot, list[0].ID))
	_, _, err = f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "replacement")
	require.NoError(t, err)
	_, _, err = f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "one too many again")
	require.ErrorIs(t, err, ErrLimitReached)

	// A full bot's tokens all fit in one deletion transaction with the bot itself.
	writes, _, err := f.svc.BotTokenDeletes(ctx, f.acct.ID, bot)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(writes), 2*MaxBotTokensPerBot)
	assert.LessOrEqual(t, len(writes)+1, store.MaxTransactWrites)
}

func TestBotTokenLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	bot := ids.At("bot", t0)
	const tries = MaxBotTokensPerBot + 10
	errs := make(chan error, tries)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			_, _, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, fmt.Sprint("t", i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrLimitReached), errors.Is(err, store.ErrUnavailable):
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	list, _, err := f.svc.ListBotTokens(ctx, f.acct.ID, bot, 100, "")
	require.NoError(t, err)
	assert.Len(t, list, ok)
	assert.LessOrEqual(t, ok, MaxBotTokensPerBot, "concurrent issuance never passes the cap")
}

func TestBotTokenDeletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	bot, otherBot := ids.At("bot", t0), ids.At("bot", t0.Add(time.Second))
	var toks []string
	for i := range 3 {
		_, tok, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, fmt.Sprint("t", i))
		require.NoError(t, err)
		_, err = f.svc.Authenticate(ctx, bearer(tok)) // cached
		require.NoError(t, err)
		toks = append(toks, tok)
	}
	_, keep, err := f.svc.IssueBotToken(ctx, f.acct.ID, otherBot, f.owner.ID, "keep")
	require.NoError(t, err)

	writes, forget, err := f.svc.BotTokenDeletes(ctx, f.acct.ID, bot)
	require.NoError(t, err)

	// A token issued after the listing fails the deletion rather than survive it.
	_, late, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "late")
	require.NoError(t, err)
	require.ErrorIs(t, f.store.Transact(ctx, writes), store.ErrConditionFailed)
	toks = append(toks, late)
	writes, forget, err = f.svc.BotTokenDeletes(ctx, f.acct.ID, bot)
	require.NoError(t, err)
	require.NoError(t, f.store.Transact(ctx, writes))

	_, err = f.svc.Authenticate(ctx, bearer(toks[0]))
	require.NoError(t, err, "until forget runs the principal is still cached")
	forget()
	for _, tok := range toks {
		_, err := f.svc.Authenticate(ctx, bearer(tok))
		require.ErrorIs(t, err, ErrUnknownToken)
	}
	list, _, err := f.svc.ListBotTokens(ctx, f.acct.ID, bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = f.svc.Authenticate(ctx, bearer(keep))
	require.NoError(t, err, "another bot's token is untouched")

	// The bot's slots are free again (for a bot of the same id, were there one).
	for range MaxBotTokensPerBot {
		_, _, err := f.svc.IssueBotToken(ctx, f.acct.ID, bot, f.owner.ID, "again")
		require.NoError(t, err)
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"ci", "ci", true},
		{"  ci ", "ci", true},
		{strings.Repeat("ü", MaxNameLen), strings.Repeat("ü", MaxNameLen), true},
		{strings.Repeat("ü", MaxNameLen+1), "", false},
		{"", "", false},
		{"\n\t ", "", false},
	}
	for _, tt := range tests {
		got, err := CheckName(tt.in)
		if !tt.ok {
			assert.Error(t, err, "%q", tt.in)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.want, got)
	}
}
