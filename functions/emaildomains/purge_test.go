package emaildomains

import (
	"testing"

	"github.com/botplatform/api/functions/emaildomains/internal/mimemail/mimemailtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

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
	require.NoError(t, purge.Run(jobs, PurgeStep(f.st), purge.Payload{AccountID: "acc_x", BotID: f.bot}))
	for _, pk := range []string{emailPK(f.bot), inboundPK(f.bot)} {
		page, err := f.st.Query(ctx, store.Query{PK: pk})
		require.NoError(t, err)
		assert.Empty(t, page.Items, pk)
	}
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
