package onboarding

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

type bots map[string]string

func (b bots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if b[bot] != account {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

func ptr[T any](v T) *T { return &v }

func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	clock := httpapitest.NewClock(t0, time.Second)
	account, bot := ids.At("acct", t0), ids.At("bot", t0)
	p := &auth.Principal{AccountID: account, Kind: auth.KindPAT, Role: auth.RoleOwner, Scopes: auth.Scopes{"*"}}
	st := sqlitetest.Open(t)
	// The account's playbook installs, as the playbooks family's look-up answers them.
	install, elsewhere, unfinished := ids.At("pbi", t0), ids.At("pbi", t0.Add(time.Minute)), ids.At("pbi", t0.Add(2*time.Minute))
	installs := map[string][2]string{install: {bot, "installed"}, elsewhere: {ids.At("bot", t0.Add(2*time.Hour)), "installed"}, unfinished: {bot, "setup"}}
	lookup := func(_ context.Context, acct, id string) (Install, error) {
		in, ok := installs[id]
		if !ok || acct != account {
			return Install{}, httpapi.NotFound("playbook install")
		}
		return Install{BotID: in[0], Status: in[1], Installed: in[1] == "installed"}, nil
	}
	svc := New(st, bots{bot: account}, lookup, clock.Now)
	ctx := context.Background()

	_, err := svc.Get(ctx, p)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	ss, err := svc.Create(ctx, p, Fields{Outcome: ptr("recover_abandoned_carts"), Vertical: ptr("ecommerce"), Channels: &[]string{"telegram", "telegram"}})
	require.NoError(t, err)
	assert.Equal(t, StatusActive, ss.Status)
	assert.Equal(t, []string{"telegram"}, ss.Channels)
	assert.Equal(t, "abandoned_cart", ss.Recommendation.PlaybookID)
	_, err = svc.Create(ctx, p, Fields{Outcome: ptr("qualify_leads"), Vertical: ptr("b2b")})
	assert.Equal(t, "onboarding_session_exists", httpapi.AsError(err).Code)

	ss, err = svc.Patch(ctx, p, PatchRequest{Fields: Fields{Outcome: ptr("book_appointments"), Vertical: ptr("services")}, ExpectedRevision: &ss.Revision})
	require.NoError(t, err)
	assert.Equal(t, "appointment_booking", ss.Recommendation.PlaybookID)
	_, err = svc.Patch(ctx, p, PatchRequest{Fields: Fields{BotID: ptr(ids.At("bot", t0.Add(time.Hour)))}, ExpectedRevision: &ss.Revision})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "another account's bot")
	_, err = svc.Patch(ctx, p, PatchRequest{Fields: Fields{Vertical: ptr("b2b")}, ExpectedRevision: ptr(int64(1))})
	assert.Equal(t, "stale_revision", httpapi.AsError(err).Code)

	// An install id must be one of the account's installs, installed, on the bot given with
	// it.
	_, err = svc.Complete(ctx, p, CompleteRequest{InstallID: &unfinished})
	assert.Equal(t, "playbook_not_installed", httpapi.AsError(err).Code, "an install still in setup is no working bot")
	assert.Equal(t, "setup", httpapi.AsError(err).Extensions["install_status"])
	_, err = svc.Complete(ctx, p, CompleteRequest{InstallID: ptr(ids.At("pbi", t0.Add(time.Hour)))})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "no such install")
	_, err = svc.Complete(ctx, p, CompleteRequest{BotID: &bot, InstallID: &elsewhere})
	assert.Equal(t, httpapi.KindInvalid, httpapi.KindOf(err), "an install on another bot")
	other := &auth.Principal{AccountID: ids.At("acct", t0.Add(time.Hour)), Kind: auth.KindPAT, Role: auth.RoleOwner, Scopes: auth.Scopes{"*"}}
	_, err = svc.Create(ctx, other, Fields{Outcome: ptr("qualify_leads"), Vertical: ptr("b2b")})
	require.NoError(t, err)
	_, err = svc.Complete(ctx, other, CompleteRequest{InstallID: &install})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "another account's install")

	ss, err = svc.Complete(ctx, p, CompleteRequest{InstallID: &install})
	require.NoError(t, err)
	assert.Equal(t, install, *ss.InstallID)
	assert.Equal(t, StatusCompleted, ss.Status)
	assert.NotNil(t, ss.CompletedAt)
	assert.Equal(t, bot, *ss.BotID, "the install's bot is the session's")
	_, err = svc.Complete(ctx, p, CompleteRequest{})
	assert.Equal(t, "onboarding_completed", httpapi.AsError(err).Code)
	_, err = svc.Patch(ctx, p, PatchRequest{Fields: Fields{Vertical: ptr("b2b")}, ExpectedRevision: &ss.Revision})
	assert.Equal(t, "onboarding_completed", httpapi.AsError(err).Code)

	// After completing, a new POST starts a new session.
	next, err := svc.Create(ctx, p, Fields{Outcome: ptr("deflect_support"), Vertical: ptr("support")})
	require.NoError(t, err)
	assert.NotEqual(t, ss.ID, next.ID)
	assert.Equal(t, StatusActive, next.Status)
	assert.Equal(t, "support_triage", next.Recommendation.PlaybookID)

	var f Fields = Fields{Outcome: ptr("world_peace"), Vertical: ptr("ecommerce"), Channels: &[]string{"fax"}}
	assert.Error(t, f.Validate())
}
