package emailevents

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func TestSuppress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := t.Context()

	require.NoError(t, f.svc.Suppress(ctx, f.bot, " Ada@Example.COM ", ReasonUnsubscribed))
	require.NoError(t, f.svc.Suppress(ctx, f.bot, "ada@example.com", ReasonUnsubscribed))
	sup := f.suppression(t, "ada@example.com")
	require.NotNil(t, sup)
	assert.Equal(t, Suppression{Address: "ada@example.com", Reason: ReasonUnsubscribed, At: t0, UpdatedAt: t0,
		History: []SuppressionEvent{{Reason: ReasonUnsubscribed, At: t0}}, Revision: 1}, *sup, "the same reason again changes nothing")

	// A complaint upgrades; an unsubscribe after it keeps the complaint.
	f.clock.Advance(time.Hour)
	changed, err := f.svc.suppress(ctx, f.bot, "ada@example.com", ReasonComplained, "ecmp_1")
	require.NoError(t, err)
	assert.True(t, changed)
	require.NoError(t, f.svc.Suppress(ctx, f.bot, "ada@example.com", ReasonUnsubscribed))
	sup = f.suppression(t, "ada@example.com")
	assert.Equal(t, ReasonComplained, sup.Reason)
	assert.Equal(t, t0, sup.At, "first suppressed")
	assert.Equal(t, t0.Add(time.Hour), sup.UpdatedAt)
	assert.Equal(t, int64(2), sup.Revision)
	cid := "ecmp_1"
	assert.Equal(t, []SuppressionEvent{{Reason: ReasonUnsubscribed, At: t0}, {Reason: ReasonComplained, At: t0.Add(time.Hour), CampaignID: &cid}}, sup.History)
	require.NoError(t, f.svc.Suppress(ctx, f.bot, "ada@example.com", ReasonBounced))
	assert.Equal(t, ReasonComplained, f.suppression(t, "ada@example.com").Reason, "a bounce is less than a complaint")
	assert.Len(t, f.suppression(t, "ada@example.com").History, 3)

	assert.Error(t, f.svc.Suppress(ctx, f.bot, "not an address", ReasonBounced))
	assert.Error(t, f.svc.Suppress(ctx, f.bot, "x@example.com", "annoyed"))

	// Concurrent events for one address all land.
	var wg sync.WaitGroup
	for _, r := range reasons {
		wg.Go(func() { assert.NoError(t, f.svc.Suppress(ctx, f.bot, "race@example.com", r)) })
	}
	wg.Wait()
	assert.Equal(t, ReasonComplained, f.suppression(t, "race@example.com").Reason)
	assert.Len(t, f.suppression(t, "race@example.com").History, 3)
}

func TestSuppressed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := t.Context()
	other := ids.At("bot", t0.Add(time.Nanosecond))
	require.NoError(t, f.svc.Suppress(ctx, f.bot, "a@example.com", ReasonBounced))
	require.NoError(t, f.svc.Suppress(ctx, f.bot, "c@example.com", ReasonComplained))
	require.NoError(t, f.svc.Suppress(ctx, other, "b@example.com", ReasonBounced))

	var batch []string
	for i := range MaxLookup - 4 {
		batch = append(batch, fmt.Sprintf("user%d@example.com", i))
	}
	batch = append(batch, "A@EXAMPLE.COM", "b@example.com", "c@example.com", "no address")
	got, err := f.svc.Suppressed(ctx, f.bot, batch)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a@example.com": ReasonBounced, "c@example.com": ReasonComplained}, got, "the bot's own list only")

	_, err = f.svc.Suppressed(ctx, f.bot, append(batch, "one@toomany.example"))
	assert.Error(t, err)
	got, err = f.svc.Suppressed(ctx, f.bot, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	want := map[string]httpapi.Access{
		"GET /api/bots/{botID}/email/suppressions":              httpapi.Need("settings:read"),
		"POST /api/bots/{botID}/email/suppressions":             httpapi.Need("settings:write", auth.RightReactions),
		"DELETE /api/bots/{botID}/email/suppressions/{address}": httpapi.Need("settings:write", auth.RightReactions),
		"GET /e/t/o/{token}":                                    httpapi.PublicSecretPath(),
		"GET /e/t/c/{token}":                                    httpapi.PublicSecretPath(),
		"GET /u/{token}":                                        httpapi.PublicSecretPath(),
		"POST /u/{token}":                                       httpapi.PublicSecretPath(),
		"POST /esp/{provider}/webhook":                          httpapi.Public(),
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func TestSuppressionRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	ctx := t.Context()
	for i, r := range []string{ReasonBounced, ReasonUnsubscribed, ReasonComplained, ReasonBounced} {
		_, err := s.svc.suppress(ctx, s.bot, fmt.Sprintf("u%d+tag@example.com", i), r, "ecmp_1")
		require.NoError(t, err)
	}
	base := "/api/bots/" + s.bot + "/email/suppressions"

	r := s.Do(t, "GET", base+"?limit=3", nil)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	data := r.JSON["data"].([]any)
	require.Len(t, data, 3)
	first := data[0].(map[string]any)
	assert.Equal(t, "u0+tag@example.com", first["address"])
	assert.Equal(t, "bounced", first["reason"])
	assert.Equal(t, "ecmp_1", first["campaign_id"])
	assert.Equal(t, "2026-03-01T12:00:00Z", first["at"])
	next, _ := r.JSON["next_cursor"].(string)
	require.NotEmpty(t, next)
	r = s.Do(t, "GET", base+"?limit=3&cursor="+next, nil)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	require.Len(t, r.JSON["data"], 1)
	assert.Nil(t, r.JSON["next_cursor"])

	r = s.Do(t, "GET", base+"?reason=bounced", nil)
	require.Equal(t, http.StatusOK, r.Code)
	var addrs []string
	for _, d := range r.JSON["data"].([]any) {
		addrs = append(addrs, d.(map[string]any)["address"].(string))
	}
	assert.Equal(t, []string{"u0+tag@example.com", "u3+tag@example.com"}, addrs)
	r = s.Do(t, "GET", base+"?reason=annoyed", nil)
	assert.Equal(t, http.StatusBadRequest, r.Code)
	assert.Equal(t, "invalid_parameter", r.Problem())

	// Delete, with the address escaped (+ and @) or as it is.
	one := base + "/" + url.PathEscape("U0+tag@Example.com")
	r = s.Do(t, "DELETE", one+"?expected_revision=2", nil)
	assert.Equal(t, http.StatusConflict, r.Code)
	assert.Equal(t, "stale_revision", r.Problem())
	r = s.Do(t, "DELETE", one+"?expected_revision=1", nil)
	assert.Equal(t, http.StatusNoContent, r.Code, r.Body)
	r = s.Do(t, "DELETE", one, nil)
	assert.Equal(t, http.StatusNotFound, r.Code)
	r = s.Do(t, "DELETE", base+"/u1%2Btag%40example.com", nil)
	assert.Equal(t, http.StatusNoContent, r.Code, r.Body)
	r = s.Do(t, "DELETE", base+"/u2+tag@example.com", nil)
	assert.Equal(t, http.StatusNoContent, r.Code, r.Body)
	got, err := s.svc.Suppressed(ctx, s.bot, []string{"u0+tag@example.com", "u1+tag@example.com", "u2+tag@example.com", "u3+tag@example.com"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"u3+tag@example.com": ReasonBounced}, got, "re-allowed")
	r = s.Do(t, "GET", base+"?reason=bounced", nil)
	assert.Len(t, r.JSON["data"], 1, "the reason index follows")

	// A later hard bounce suppresses a re-allowed address afresh.
	require.NoError(t, s.svc.Suppress(ctx, s.bot, "u0+tag@example.com", ReasonBounced))
	assert.Equal(t, int64(1), s.suppression(t, "u0+tag@example.com").Revision)

	// Others' bots are not found; the rights are checked.
	r = s.Do(t, "GET", "/api/bots/bot_other/email/suppressions", nil)
	assert.Equal(t, http.StatusNotFound, r.Code)
	tok := s.PAT(t, s.Owner, "settings:read")
	r = s.DoAs(t, tok, "DELETE", base+"/u3+tag@example.com", nil)
	assert.Equal(t, http.StatusForbidden, r.Code)
	assert.Equal(t, "insufficient_scope", r.Problem())
	r = s.DoAs(t, tok, "GET", base, nil)
	assert.Equal(t, http.StatusOK, r.Code)
}

// POST .../email/suppressions adds addresses by hand (a list brought from another
// platform): each once, lower-cased, as an event of its reason would, counting what was
// already there; bad bodies are 400 naming the field, never the address; it needs
// settings:write and the Reactions right, and another account's bot is 404.
func TestSuppressionImport(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	base := "/api/bots/" + s.bot + "/email/suppressions"
	_, err := s.svc.suppress(t.Context(), s.bot, "old@example.com", ReasonBounced, "ecmp_1")
	require.NoError(t, err)

	r := s.Do(t, "POST", base, map[string]any{"reason": "unsubscribed",
		"addresses": []string{"Ann@Example.com", "ann@example.com", "bob@example.org", "old@example.com"}})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, map[string]any{"suppressed": 3.0, "unchanged": 0.0}, r.JSON, "Ann once; old@ gains the reason")
	got, err := s.svc.Suppressed(t.Context(), s.bot, []string{"ann@example.com", "bob@example.org", "old@example.com"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ann@example.com": ReasonUnsubscribed, "bob@example.org": ReasonUnsubscribed,
		"old@example.com": ReasonBounced}, got, "a bounce stays the stronger reason")
	old := s.suppression(t, "old@example.com")
	require.Len(t, old.History, 2)
	assert.Nil(t, old.History[1].CampaignID, "added by hand: no campaign")

	r = s.Do(t, "POST", base, map[string]any{"reason": "unsubscribed", "addresses": []string{"bob@example.org"}})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, map[string]any{"suppressed": 0.0, "unchanged": 1.0}, r.JSON, "the same again changes nothing")

	tooMany := make([]string, MaxImport+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("p%d@example.com", i)
	}
	for name, body := range map[string]map[string]any{
		"no reason":      {"addresses": []string{"a@example.com"}},
		"unknown reason": {"reason": "annoyed", "addresses": []string{"a@example.com"}},
		"no addresses":   {"reason": "unsubscribed", "addresses": []string{}},
		"too many":       {"reason": "unsubscribed", "addresses": tooMany},
		"not an address": {"reason": "unsubscribed", "addresses": []string{"a@example.com", "secret-not-an-address"}},
		"unknown field":  {"reason": "unsubscribed", "addresses": []string{"a@example.com"}, "source": "csv"},
	} {
		r := s.Do(t, "POST", base, body)
		assert.Equal(t, http.StatusBadRequest, r.Code, "%s: %s", name, r.Body)
		assert.NotContains(t, string(r.Body), "secret-not-an-address", name)
	}
	r = s.Do(t, "POST", base, map[string]any{"reason": "unsubscribed", "addresses": []string{"a@example.com", "nope"}})
	assert.Contains(t, string(r.Body), "addresses[1]", "the bad address is named by its index")
	assert.Nil(t, s.suppression(t, "a@example.com"), "a refused request suppresses nothing")

	r = s.Do(t, "POST", "/api/bots/bot_other/email/suppressions", map[string]any{"reason": "unsubscribed", "addresses": []string{"a@example.com"}})
	assert.Equal(t, http.StatusNotFound, r.Code)
	tok := s.PAT(t, s.Owner, "settings:read")
	r = s.DoAs(t, tok, "POST", base, map[string]any{"reason": "unsubscribed", "addresses": []string{"a@example.com"}})
	assert.Equal(t, http.StatusForbidden, r.Code)
	assert.Equal(t, "insufficient_scope", r.Problem())
	member, err := s.Auth.CreateUser(sqlitetest.Unrecorded(t.Context()), s.Account.ID, "Member", 0)
	require.NoError(t, err)
	r = s.DoAs(t, s.PAT(t, member, "settings:read", "settings:write"), "POST", base, map[string]any{"reason": "unsubscribed", "addresses": []string{"a@example.com"}})
	assert.Equal(t, http.StatusForbidden, r.Code)
	assert.Equal(t, "missing_right", r.Problem())
}

func TestPurgeStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	other := ids.At("bot", t0.Add(time.Nanosecond))
	for _, bot := range []string{f.bot, other} {
		require.NoError(t, f.svc.Suppress(t.Context(), bot, "a@example.com", ReasonBounced))
		require.NoError(t, f.svc.Suppress(t.Context(), bot, "b@example.com", ReasonComplained))
	}
	ctx := sqlitetest.Unrecorded(t.Context())
	mine, err := f.raw.Mentioning(ctx, f.bot)
	require.NoError(t, err)
	require.Len(t, mine, 2)

	require.NoError(t, purge.Run(sqlitetest.As(t.Context(), "jobs"), PurgeStep(f.raw), purge.Payload{AccountID: "acct_x", BotID: f.bot}))

	left, err := f.raw.Mentioning(ctx, f.bot)
	require.NoError(t, err)
	assert.Empty(t, left)
	theirs, err := f.raw.Mentioning(ctx, other)
	require.NoError(t, err)
	assert.Len(t, theirs, 2, "another bot's list is untouched")
}
