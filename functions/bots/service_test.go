package bots

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// countingStore counts reads and writes; afterGet runs after each Get.
type countingStore struct {
	store.Store
	gets, puts atomic.Int64
	afterGet   atomic.Pointer[func(store.Key)]
	afterQuery atomic.Pointer[func(store.Query)]
}

func (s *countingStore) Get(ctx context.Context, key store.Key) (store.Item, error) {
	s.gets.Add(1)
	it, err := s.Store.Get(ctx, key)
	if f := s.afterGet.Load(); f != nil {
		(*f)(key)
	}
	return it, err
}

func (s *countingStore) Query(ctx context.Context, q store.Query) (store.Page, error) {
	page, err := s.Store.Query(ctx, q)
	if f := s.afterQuery.Load(); f != nil {
		(*f)(q)
	}
	return page, err
}

func (s *countingStore) Put(ctx context.Context, it store.Item, cond store.Condition) error {
	s.puts.Add(1)
	return s.Store.Put(ctx, it, cond)
}

type fixture struct {
	svc   *Service
	auth  *auth.Service
	store *countingStore
	clock *httpapitest.Clock
	acct  string
	owner string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	cs := &countingStore{Store: sqlitetest.Open(t, sqlite.WithClock(c.Now))}
	a := auth.NewService(cs, c.Now, nil)
	acct, owner, err := a.CreateAccount(t.Context(), "Acme")
	require.NoError(t, err)
	return &fixture{svc: NewService(cs, a, c.Now), auth: a, store: cs, clock: c, acct: acct.ID, owner: owner.ID}
}

func (f *fixture) bot(t *testing.T, name string) Bot {
	t.Helper()
	b, err := f.svc.Create(t.Context(), f.acct, name, nil)
	require.NoError(t, err)
	return b
}

func ptr[T any](v T) *T { return &v }

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	locales := func(n int) *[]string {
		l := []string{"en"}
		for i := 1; i < n; i++ {
			l = append(l, "en-"+string(rune('A'+i/26%26))+string(rune('A'+i%26)))
		}
		return &l
	}
	tests := []struct {
		name     string
		botName  string
		settings *SettingsPatch
		problems []string // nil: created
	}{
		{"defaults", "Support", nil, nil},
		{"100 characters", strings.Repeat("ß", MaxNameLen), nil, nil},
		{"101 characters", strings.Repeat("ß", MaxNameLen+1), nil, []string{"name"}},
		{"empty name", "", nil, []string{"name"}},
		{"blank name", "  \t", nil, []string{"name"}},

		{"IANA zone", "b", &SettingsPatch{Timezone: ptr("Europe/Berlin")}, nil},
		{"deep IANA zone", "b", &SettingsPatch{Timezone: ptr("America/Argentina/Buenos_Aires")}, nil},
		{"unknown zone", "b", &SettingsPatch{Timezone: ptr("Mars/Base")}, []string{"settings.timezone"}},
		{"Local is not a zone", "b", &SettingsPatch{Timezone: ptr("Local")}, []string{"settings.timezone"}},
		{"empty zone", "b", &SettingsPatch{Timezone: ptr("")}, []string{"settings.timezone"}},
		{"path traversal zone", "b", &SettingsPatch{Timezone: ptr("../../etc/passwd")}, []string{"settings.timezone"}},

		{"region locale", "b", &SettingsPatch{DefaultLocale: ptr("pt-BR"), SupportedLocales: &[]string{"pt-BR"}}, nil},
		{"script and region", "b", &SettingsPatch{DefaultLocale: ptr("zh-Hant-TW"), SupportedLocales: &[]string{"zh-Hant-TW", "en"}}, nil},
		{"numeric region", "b", &SettingsPatch{DefaultLocale: ptr("es-419"), SupportedLocales: &[]string{"es-419"}}, nil},
		{"bad locale", "b", &SettingsPatch{DefaultLocale: ptr("english")}, []string{"settings.default_locale", "settings.supported_locales[1]"}},
		{"upper-case language", "b", &SettingsPatch{DefaultLocale: ptr("EN"), SupportedLocales: &[]string{"en"}}, []string{"settings.default_locale"}},
		{"lower-case region", "b", &SettingsPatch{DefaultLocale: ptr("pt-br"), SupportedLocales: &[]string{"en"}}, []string{"settings.default_locale"}},
		{"underscore", "b", &SettingsPatch{DefaultLocale: ptr("pt_BR"), SupportedLocales: &[]string{"en"}}, []string{"settings.default_locale"}},
		{"default not supported", "b", &SettingsPatch{DefaultLocale: ptr("fr"), SupportedLocales: &[]string{"en", "de"}}, []string{"settings.supported_locales"}},
		{"duplicate supported", "b", &SettingsPatch{SupportedLocales: &[]string{"en", "de", "en"}}, []string{"settings.supported_locales[2]"}},
		{"bad supported entry", "b", &SettingsPatch{SupportedLocales: &[]string{"en", "x"}}, []string{"settings.supported_locales[1]"}},
		{"no supported", "b", &SettingsPatch{SupportedLocales: &[]string{}}, []string{"settings.supported_locales"}},
		{"20 supported", "b", &SettingsPatch{SupportedLocales: locales(20)}, nil},
		{"21 supported", "b", &SettingsPatch{SupportedLocales: locales(21)}, []string{"settings.supported_locales"}},

		{"shortest session", "b", &SettingsPatch{SessionTimeoutMinutes: ptr(1)}, nil},
		{"longest session", "b", &SettingsPatch{SessionTimeoutMinutes: ptr(7 * 24 * 60)}, nil},
		{"zero session", "b", &SettingsPatch{SessionTimeoutMinutes: ptr(0)}, []string{"settings.session_timeout_minutes"}},
		{"negative session", "b", &SettingsPatch{SessionTimeoutMinutes: ptr(-5)}, []string{"settings.session_timeout_minutes"}},
		{"session over a week", "b", &SettingsPatch{SessionTimeoutMinutes: ptr(7*24*60 + 1)}, []string{"settings.session_timeout_minutes"}},

		{"every problem at once", "", &SettingsPatch{Timezone: ptr("Mars/Base"), SessionTimeoutMinutes: ptr(0)},
			[]string{"name", "settings.timezone", "settings.session_timeout_minutes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := f.svc.Create(t.Context(), f.acct, tt.botName, tt.settings)
			if tt.problems != nil {
				assert.Equal(t, tt.problems, httpapitest.InvalidFields(t, err))
				assert.Equal(t, 400, httpapitest.AsError(t, err).Status())
				return
			}
			require.NoError(t, err)
			got, err := f.svc.Get(t.Context(), f.acct, b.ID)
			require.NoError(t, err)
			assert.Equal(t, b, got, "stored as returned")
		})
	}
}

func TestCreateDefaults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b, err := f.svc.Create(t.Context(), f.acct, "  Support  ", nil)
	require.NoError(t, err)
	assert.True(t, ids.Valid("bot", b.ID))
	assert.Equal(t, "Support", b.Name, "trimmed")
	assert.Equal(t, Settings{Timezone: "UTC", DefaultLocale: "en", SupportedLocales: []string{"en"}, SessionTimeoutMinutes: 30}, b.Settings)
	assert.Equal(t, int64(1), b.Revision)
	assert.Equal(t, t0, b.CreatedAt)
	assert.Equal(t, t0, b.UpdatedAt)

	// Given fields replace defaults; a new default locale joins the default list.
	b, err = f.svc.Create(t.Context(), f.acct, "de", &SettingsPatch{DefaultLocale: ptr("de"), Timezone: ptr("Europe/Berlin")})
	require.NoError(t, err)
	assert.Equal(t, Settings{Timezone: "Europe/Berlin", DefaultLocale: "de", SupportedLocales: []string{"en", "de"}, SessionTimeoutMinutes: 30}, b.Settings)

	// An empty settings object changes nothing.
	b, err = f.svc.Create(t.Context(), f.acct, "empty", &SettingsPatch{})
	require.NoError(t, err)
	assert.Equal(t, DefaultSettings(), b.Settings)

	// DefaultSettings hands out a fresh list each time.
	d := DefaultSettings()
	d.SupportedLocales[0] = "xx"
	assert.Equal(t, []string{"en"}, DefaultSettings().SupportedLocales)
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("stale revision", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		_, err := f.svc.Update(ctx, f.acct, b.ID, 1, ptr("b"), nil)
		require.NoError(t, err)
		_, err = f.svc.Update(ctx, f.acct, b.ID, 1, ptr("c"), nil)
		he := httpapitest.AsError(t, err)
		assert.Equal(t, 409, he.Status())
		assert.Equal(t, "stale_revision", he.Code)
		assert.Equal(t, int64(2), he.Extensions["current_revision"])
		// A stale request is refused before its fields are looked at.
		_, err = f.svc.Update(ctx, f.acct, b.ID, 7, ptr(""), nil)
		assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
		got, err := f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err)
		assert.Equal(t, "b", got.Name)
	})

	t.Run("no-op keeps the revision", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		f.clock.Advance(time.Hour)
		f.store.puts.Store(0)
		got, err := f.svc.Update(ctx, f.acct, b.ID, 1, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, b, got)
		got, err = f.svc.Update(ctx, f.acct, b.ID, 1, nil, &SettingsPatch{})
		require.NoError(t, err)
		assert.Equal(t, b, got, "an empty settings object is no change either")
		assert.Zero(t, f.store.puts.Load(), "nothing written")
	})

	t.Run("changes bump the revision", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		f.clock.Advance(time.Hour)
		got, err := f.svc.Update(ctx, f.acct, b.ID, 1, ptr(" renamed "), &SettingsPatch{SessionTimeoutMinutes: ptr(60)})
		require.NoError(t, err)
		assert.Equal(t, "renamed", got.Name)
		assert.Equal(t, 60, got.Settings.SessionTimeoutMinutes)
		assert.Equal(t, "UTC", got.Settings.Timezone, "fields not sent keep their value")
		assert.Equal(t, int64(2), got.Revision)
		assert.Equal(t, t0, got.CreatedAt)
		assert.Equal(t, t0.Add(time.Hour), got.UpdatedAt)
		stored, err := f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err)
		assert.Equal(t, got, stored)

		// Sending the values the bot already has changes nothing: no new revision, no write.
		f.clock.Advance(time.Hour)
		f.store.puts.Store(0)
		same, err := f.svc.Update(ctx, f.acct, b.ID, 2, ptr("renamed"), &SettingsPatch{SessionTimeoutMinutes: ptr(60), Timezone: ptr("UTC")})
		require.NoError(t, err)
		assert.Equal(t, got, same)
		assert.Zero(t, f.store.puts.Load())
	})

	t.Run("default locale joins the supported list", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		got, err := f.svc.Update(ctx, f.acct, b.ID, 1, nil, &SettingsPatch{DefaultLocale: ptr("de")})
		require.NoError(t, err)
		assert.Equal(t, "de", got.Settings.DefaultLocale)
		assert.Equal(t, []string{"en", "de"}, got.Settings.SupportedLocales)

		// Already listed: not added twice.
		got, err = f.svc.Update(ctx, f.acct, b.ID, 2, nil, &SettingsPatch{DefaultLocale: ptr("en")})
		require.NoError(t, err)
		assert.Equal(t, []string{"en", "de"}, got.Settings.SupportedLocales)

		// A supported list without the default is refused, and nothing changes.
		_, err = f.svc.Update(ctx, f.acct, b.ID, 3, nil, &SettingsPatch{SupportedLocales: &[]string{"fr"}})
		assert.Equal(t, []string{"settings.supported_locales"}, httpapitest.InvalidFields(t, err))
		// Sending both changes both.
		got, err = f.svc.Update(ctx, f.acct, b.ID, 3, nil, &SettingsPatch{DefaultLocale: ptr("fr"), SupportedLocales: &[]string{"fr"}})
		require.NoError(t, err)
		assert.Equal(t, Settings{Timezone: "UTC", DefaultLocale: "fr", SupportedLocales: []string{"fr"}, SessionTimeoutMinutes: 30}, got.Settings)
	})

	t.Run("invalid changes are not stored", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		_, err := f.svc.Update(ctx, f.acct, b.ID, 1, ptr(""), &SettingsPatch{Timezone: ptr("Local")})
		assert.Equal(t, []string{"name", "settings.timezone"}, httpapitest.InvalidFields(t, err))
		got, err := f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err)
		assert.Equal(t, b, got)
	})

	t.Run("missing or foreign bot", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		for _, c := range []struct{ acct, id string }{
			{f.acct, ids.At("bot", t0)},
			{f.acct, "bot_nope"},
			{ids.At("acct", t0), b.ID},
		} {
			_, err := f.svc.Update(ctx, c.acct, c.id, 1, ptr("x"), nil)
			assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
		}
	})

	t.Run("a write between read and write is a conflict", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		// Another writer commits revision 2 right after Update has read revision 1.
		var once sync.Once
		hook := func(k store.Key) {
			if k != botKey(f.acct, b.ID) {
				return
			}
			once.Do(func() {
				other := NewService(f.store.Store, f.auth, f.clock.Now)
				_, err := other.Update(ctx, f.acct, b.ID, 1, ptr("theirs"), nil)
				require.NoError(t, err)
			})
		}
		f.store.afterGet.Store(&hook)
		_, err := f.svc.Update(ctx, f.acct, b.ID, 1, ptr("mine"), nil)
		f.store.afterGet.Store(nil)
		he := httpapitest.AsError(t, err)
		assert.Equal(t, "stale_revision", he.Code)
		assert.Equal(t, int64(2), he.Extensions["current_revision"])
		got, err := f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err)
		assert.Equal(t, "theirs", got.Name)
	})
}

func TestGetAndLoadBot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	b := f.bot(t, "a")

	loaded, err := f.svc.LoadBot(ctx, f.acct, b.ID)
	require.NoError(t, err)
	assert.Equal(t, b, loaded)

	for _, id := range []string{"", "nope", "bot_", "bot_tooshort", strings.ToUpper(b.ID), ids.At("btk", t0), b.ID + "x"} {
		f.store.gets.Store(0)
		_, err := f.svc.LoadBot(ctx, f.acct, id)
		assert.Equal(t, 404, httpapitest.AsError(t, err).Status(), id)
		assert.Zero(t, f.store.gets.Load(), "%q: refused without a store read", id)
	}

	_, err = f.svc.LoadBot(ctx, ids.At("acct", t0), b.ID)
	assert.Equal(t, 404, httpapitest.AsError(t, err).Status(), "another account's bot is not found")
	_, err = f.svc.LoadBot(ctx, f.acct, ids.At("bot", t0))
	assert.Equal(t, 404, httpapitest.AsError(t, err).Status(), "a well-formed id that does not exist")

	// A caller may change its copy without touching what the next caller gets.
	got, err := f.svc.Get(ctx, f.acct, b.ID)
	require.NoError(t, err)
	got.Settings.SupportedLocales[0] = "xx"
	got, err = f.svc.Get(ctx, f.acct, b.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"en"}, got.Settings.SupportedLocales)

	// A change made through another Service (another process) is seen at once.
	other := NewService(f.store.Store, f.auth, f.clock.Now)
	_, err = other.Update(ctx, f.acct, b.ID, 1, ptr("renamed"), nil)
	require.NoError(t, err)
	got, err = f.svc.Get(ctx, f.acct, b.ID)
	require.NoError(t, err)
	assert.Equal(t, "renamed", got.Name)
}

func TestList(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	var want []string
	for _, name := range []string{"a", "b", "c"} {
		f.clock.Advance(time.Second)
		want = append(want, f.bot(t, name).ID)
	}
	// Tokens and users share the partition; List shows only bots.
	_, _, err := f.svc.IssueToken(ctx, f.acct, want[0], f.owner, "t")
	require.NoError(t, err)

	page, next, err := f.svc.List(ctx, f.acct, 2, "")
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.NotEmpty(t, next)
	rest, next, err := f.svc.List(ctx, f.acct, 2, next)
	require.NoError(t, err)
	assert.Empty(t, next)
	got := []string{page[0].ID, page[1].ID}
	for _, b := range rest {
		got = append(got, b.ID)
	}
	assert.Equal(t, want, got, "oldest first, each once")

	others, _, err := f.svc.List(ctx, ids.At("acct", t0), 50, "")
	require.NoError(t, err)
	assert.Empty(t, others)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("removes the bot and its tokens", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		keep := f.bot(t, "keep")
		_, tok, err := f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "widget")
		require.NoError(t, err)
		_, keepTok, err := f.svc.IssueToken(ctx, f.acct, keep.ID, f.owner, "widget")
		require.NoError(t, err)
		_, err = f.auth.Authenticate(ctx, "Bearer "+tok) // now cached
		require.NoError(t, err)

		require.NoError(t, f.svc.Delete(ctx, f.acct, b.ID, nil))

		_, err = f.svc.Get(ctx, f.acct, b.ID)
		assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
		_, err = f.auth.Authenticate(ctx, "Bearer "+tok)
		assert.ErrorIs(t, err, auth.ErrUnknownToken, "this process stops accepting it at once")
		fresh := auth.NewService(f.store, f.clock.Now, nil)
		_, err = fresh.Authenticate(ctx, "Bearer "+tok)
		assert.ErrorIs(t, err, auth.ErrUnknownToken, "its credential is gone from the store")
		toks, _, err := f.auth.ListBotTokens(ctx, f.acct, b.ID, 50, "")
		require.NoError(t, err)
		assert.Empty(t, toks)

		_, err = f.auth.Authenticate(ctx, "Bearer "+keepTok)
		assert.NoError(t, err, "another bot's token is untouched")

		err = f.svc.Delete(ctx, f.acct, b.ID, nil)
		assert.Equal(t, 404, httpapitest.AsError(t, err).Status(), "deleting twice")
	})

	t.Run("at a revision", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		_, tok, err := f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "widget")
		require.NoError(t, err)
		_, err = f.svc.Update(ctx, f.acct, b.ID, 1, ptr("b"), nil)
		require.NoError(t, err)

		err = f.svc.Delete(ctx, f.acct, b.ID, ptr(int64(1)))
		he := httpapitest.AsError(t, err)
		assert.Equal(t, 409, he.Status())
		assert.Equal(t, "stale_revision", he.Code)
		assert.Equal(t, int64(2), he.Extensions["current_revision"])
		_, err = f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err, "still there")
		_, err = f.auth.Authenticate(ctx, "Bearer "+tok)
		require.NoError(t, err, "and so are its tokens: the transaction wrote nothing")

		require.NoError(t, f.svc.Delete(ctx, f.acct, b.ID, ptr(int64(2))))
		_, err = f.svc.Get(ctx, f.acct, b.ID)
		assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
	})

	t.Run("missing or foreign", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		for _, c := range []struct{ acct, id string }{
			{f.acct, ids.At("bot", t0)},
			{f.acct, "bot_nope"},
			{ids.At("acct", t0), b.ID},
		} {
			err := f.svc.Delete(ctx, c.acct, c.id, nil)
			assert.Equal(t, 404, httpapitest.AsError(t, err).Status(), c)
			err = f.svc.Delete(ctx, c.acct, c.id, ptr(int64(1)))
			assert.Equal(t, 404, httpapitest.AsError(t, err).Status(), c)
		}
		_, err := f.svc.Get(ctx, f.acct, b.ID)
		require.NoError(t, err, "another account cannot delete it")
	})

	// A token issued after Delete has listed the bot's tokens and before its transaction
	// commits must not outlive the bot as a working credential.
	t.Run("a token issued during the deletion", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		_, _, err := f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "before")
		require.NoError(t, err)
		var late string
		var once sync.Once
		hook := func(q store.Query) {
			if !strings.HasPrefix(q.Prefix, "BOTTOKEN#") {
				return
			}
			once.Do(func() {
				var err error
				_, late, err = f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "late")
				require.NoError(t, err)
			})
		}
		f.store.afterQuery.Store(&hook)
		err = f.svc.Delete(ctx, f.acct, b.ID, nil)
		f.store.afterQuery.Store(nil)
		require.NoError(t, err)
		require.NotEmpty(t, late)

		_, err = f.svc.Get(ctx, f.acct, b.ID)
		assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
		_, err = auth.NewService(f.store, f.clock.Now, nil).Authenticate(ctx, "Bearer "+late)
		assert.ErrorIs(t, err, auth.ErrUnknownToken, "no token of a deleted bot survives")
		toks, _, err := f.auth.ListBotTokens(ctx, f.acct, b.ID, 50, "")
		require.NoError(t, err)
		assert.Empty(t, toks)
	})

	t.Run("a bot with the most tokens", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		b := f.bot(t, "a")
		for range auth.MaxBotTokensPerBot {
			_, _, err := f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "t")
			require.NoError(t, err)
		}
		require.NoError(t, f.svc.Delete(ctx, f.acct, b.ID, nil), "one transaction holds the bot and all its tokens")
	})
}

func TestIssueToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	b := f.bot(t, "a")

	bt, tok, err := f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "widget")
	require.NoError(t, err)
	assert.Equal(t, b.ID, bt.BotID)
	p, err := f.auth.Authenticate(ctx, "Bearer "+tok)
	require.NoError(t, err)
	assert.Equal(t, b.ID, p.BotID)
	assert.Equal(t, f.acct, p.AccountID)

	_, _, err = f.svc.IssueToken(ctx, ids.At("acct", t0), b.ID, f.owner, "widget")
	assert.ErrorIs(t, err, auth.ErrNotFound, "not for another account's bot")
	_, _, err = f.svc.IssueToken(ctx, f.acct, ids.At("bot", t0), f.owner, "widget")
	assert.ErrorIs(t, err, auth.ErrNotFound, "not for a bot that never existed")

	require.NoError(t, f.svc.Delete(ctx, f.acct, b.ID, nil))
	_, _, err = f.svc.IssueToken(ctx, f.acct, b.ID, f.owner, "late")
	assert.ErrorIs(t, err, auth.ErrNotFound, "not after the bot is deleted")
	toks, _, err := f.auth.ListBotTokens(ctx, f.acct, b.ID, 50, "")
	require.NoError(t, err)
	assert.Empty(t, toks, "and nothing was written")
}
