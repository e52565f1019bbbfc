package emaildomains

import (
	"errors"
	"testing"

	"github.com/botplatform/api/functions/emaildomains/internal/mimemail/mimemailtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Without a provider client (the local process), the purge still erases everything and
// releases the bot's claims.
func TestPurgeReleasesClaims(t *testing.T) {
	t.Parallel()
	in := newInbound(t)
	f := in.f
	ctx := t.Context()
	r := in.postJSON(t, map[string]any{"raw": b64(mimemailtest.SampleMail("support@example.com", "p1@sender.example"))})
	require.Equal(t, 1.0, r.JSON["stored"], r.Body)
	_, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "pending.example"})
	require.NoError(t, err)
	other := ids.At("bot", t0)
	kept := f.verified(t, other, "example.org")

	// On AWS the jobs Lambda runs the purge.
	jobs := sqlitetest.As(ctx, "jobs")
	require.NoError(t, purge.Run(jobs, PurgeStep(f.st, nil), purge.Payload{AccountID: "acc_x", BotID: f.bot}))
	f.requirePurged(t)
	_, err = f.st.Get(ctx, claimKey("example.com"))
	assert.ErrorIs(t, err, store.ErrNotFound, "the name is free for other bots")
	c, _, ok, err := f.svc.readClaim(ctx, "example.org")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, claim{BotID: other, DomainID: kept.ID}, c, "another bot's claim stays")

	// The freed name verifies for another bot.
	d := f.verified(t, other, "example.com")
	assert.Equal(t, StatusVerified, d.Status)
}

// requirePurged fails unless the bot's email partitions are empty.
func (f *fixture) requirePurged(t *testing.T) {
	t.Helper()
	for _, pk := range []string{emailPK(f.bot), inboundPK(f.bot)} {
		page, err := f.st.Query(t.Context(), store.Query{PK: pk})
		require.NoError(t, err)
		assert.Empty(t, page.Items, pk)
	}
}

// The purge deregisters from SES the identities of the names the bot claims, and only
// those: a name another bot verified after it is theirs, and so is its identity.
func TestPurgeDeregistersSESIdentities(t *testing.T) {
	t.Parallel()
	fake, ses := newFakeSES(t)
	f := newFixture(t, func(c *Config) { c.Identities = ses })
	ctx := t.Context()
	other := ids.At("bot", t0)

	f.verified(t, f.bot, "example.com")
	// An identity already removed by hand (SES answers NotFound): nothing left to do.
	f.verified(t, f.bot, "gone.example")
	fake.mu.Lock()
	delete(fake.identities, "gone.example")
	fake.mu.Unlock()
	// The bot added shared.example but another bot verified it first.
	_, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "shared.example"})
	require.NoError(t, err)
	theirs := f.verified(t, other, "shared.example")
	kept := f.verified(t, other, "example.org")
	require.Contains(t, fake.identities, "example.com")

	before := len(fake.callsSince(0))
	jobs := sqlitetest.As(ctx, "jobs")
	require.NoError(t, purge.Run(jobs, PurgeStep(f.st, ses), purge.Payload{AccountID: "acc_x", BotID: f.bot}))
	calls := fake.callsSince(before)
	assert.ElementsMatch(t, []string{
		"DELETE /v2/email/identities/example.com",
		"DELETE /v2/email/identities/gone.example",
	}, calls)
	// On AWS the jobs Lambda makes these calls: its row of the IAM table must allow them.
	requireSESGranted(t, "jobs", calls)

	assert.NotContains(t, fake.identities, "example.com")
	assert.Contains(t, fake.identities, "shared.example", "another bot's identity stays")
	assert.Contains(t, fake.identities, "example.org")
	f.requirePurged(t)
	for _, name := range []string{"example.com", "gone.example"} {
		_, err = f.st.Get(ctx, claimKey(name))
		assert.ErrorIs(t, err, store.ErrNotFound, name)
	}
	for _, d := range []Domain{theirs, kept} {
		c, _, ok, err := f.svc.readClaim(ctx, d.Name)
		require.NoError(t, err)
		require.True(t, ok, d.Name)
		assert.Equal(t, claim{BotID: other, DomainID: d.ID}, c, "another bot's claim stays")
	}
}

// A deregistration that fails fails the step, and keeps the domain and its claim, so that the
// jobs runner tries again; the rerun completes.
func TestPurgeRetriesFailedDeregistration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d := f.verified(t, f.bot, "example.com")
	require.Contains(t, f.ids.registered, "example.com")

	f.ids.mu.Lock()
	f.ids.err = errors.New("ses: throttled")
	f.ids.mu.Unlock()
	jobs := sqlitetest.As(ctx, "jobs")
	p := purge.Payload{AccountID: "acc_x", BotID: f.bot}
	err := purge.Run(jobs, PurgeStep(f.st, f.ids), p)
	require.ErrorContains(t, err, "ses: throttled")
	_, err = f.st.Get(ctx, domainKey(f.bot, d.ID))
	require.NoError(t, err, "the domain stays until the provider let it go")
	c, _, ok, err := f.svc.readClaim(ctx, "example.com")
	require.NoError(t, err)
	require.True(t, ok, "and so does its claim: no other bot can register the name meanwhile")
	assert.Equal(t, f.bot, c.BotID)

	f.ids.mu.Lock()
	f.ids.err = nil
	f.ids.mu.Unlock()
	require.NoError(t, purge.Run(jobs, PurgeStep(f.st, f.ids), p))
	assert.Equal(t, []string{"example.com", "example.com"}, f.ids.deregistered, "tried, then done")
	f.requirePurged(t)
	_, err = f.st.Get(ctx, claimKey("example.com"))
	assert.ErrorIs(t, err, store.ErrNotFound)
}
