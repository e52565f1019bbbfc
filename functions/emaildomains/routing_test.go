package emaildomains

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
)

func ptr[T any](v T) *T { return &v }

func TestRouteValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   NewRoute
		want []string
	}{
		{NewRoute{}, []string{"domain_id", "match", "action"}},
		{NewRoute{DomainID: "edom_x", Match: "sup*port", Action: &Action{Type: ActionStore}}, []string{"match"}},
		{NewRoute{DomainID: "edom_x", Match: "a b", Action: &Action{Type: "bounce"}}, []string{"match", "action.type"}},
		{NewRoute{DomainID: "edom_x", Match: "*", Action: &Action{Type: ActionForward}}, []string{"action.to"}},
		{NewRoute{DomainID: "edom_x", Match: "*", Action: &Action{Type: ActionForward, To: "Ada <ada@example.org>"}}, []string{"action.to"}},
		{NewRoute{DomainID: "edom_x", Match: "*", Action: &Action{Type: ActionReaction, ReactionID: "nope"}}, []string{"action.reaction_id"}},
		{NewRoute{DomainID: "edom_x", Match: "*", Action: &Action{Type: ActionStore, To: "a@b.example"}}, []string{"action"}},
	}
	for i, tc := range cases {
		err := tc.in.Validate()
		require.Error(t, err, i)
		assert.Equal(t, tc.want, httpapitest.InvalidFields(t, err), i)
	}
	ok := NewRoute{DomainID: "edom_x", Match: "Orders+*", Action: &Action{Type: ActionForward, To: "Ada@Example.ORG"}}
	require.NoError(t, ok.Validate())
	assert.Equal(t, "orders+*", ok.Match)
	assert.Equal(t, "Ada@example.org", ok.Action.To, "the domain is lower-cased, the local part is the receiver's")
}

func TestRouteLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	pending, err := f.svc.Add(ctx, f.bot, NewDomain{Name: "pending.example"})
	require.NoError(t, err)
	_, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: pending.ID, Match: "support", Action: &Action{Type: ActionStore}})
	assert.Equal(t, "domain_not_verified", httpapitest.AsError(t, err).Code)
	_, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: ids.At("edom", t0), Match: "support", Action: &Action{Type: ActionStore}})
	assert.Equal(t, []string{"domain_id"}, httpapitest.InvalidFields(t, err))

	d := f.verified(t, f.bot, "example.com")
	other := f.verified(t, f.bot, "example.org")
	_, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: d.ID, Match: "*", Action: &Action{Type: ActionForward, To: "team@EXAMPLE.com"}})
	assert.Equal(t, []string{"action.to"}, httpapitest.InvalidFields(t, err), "a forward to its own domain would loop")

	r, err := f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: d.ID, Match: "Support", Action: &Action{Type: ActionForward, To: "team@example.net"}})
	require.NoError(t, err)
	assert.True(t, ids.Valid("eir", r.ID))
	assert.Equal(t, InboundRoute{ID: r.ID, DomainID: d.ID, Domain: "example.com", Match: "support",
		Action: Action{Type: ActionForward, To: "team@example.net"}, Revision: 1, CreatedAt: t0, UpdatedAt: t0}, r)
	_, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: d.ID, Match: "SUPPORT", Action: &Action{Type: ActionStore}})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "name_taken", he.Code)
	assert.Equal(t, r.ID, he.Extensions["conflicting_id"])
	// The same match on another domain is another route.
	r2, err := f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: other.ID, Match: "support", Action: &Action{Type: ActionStore}})
	require.NoError(t, err)

	_, err = f.svc.UpdateRoute(ctx, f.bot, r.ID, RouteChange{ExpectedRevision: ptr(int64(7)), Match: ptr("help")})
	he = httpapitest.AsError(t, err)
	assert.Equal(t, "stale_revision", he.Code)
	assert.Equal(t, int64(1), he.Extensions["current_revision"])
	_, err = f.svc.UpdateRoute(ctx, f.bot, r.ID, RouteChange{ExpectedRevision: ptr(int64(1))})
	assert.Equal(t, []string{"action"}, httpapitest.InvalidFields(t, err), "a change needs something to change")
	_, err = f.svc.UpdateRoute(ctx, f.bot, r2.ID, RouteChange{ExpectedRevision: ptr(int64(1)), DomainID: &d.ID})
	assert.Equal(t, "name_taken", httpapitest.AsError(t, err).Code, "moving onto a taken match")

	f.clock.Advance(60e9)
	up, err := f.svc.UpdateRoute(ctx, f.bot, r.ID, RouteChange{ExpectedRevision: ptr(int64(1)), Match: ptr("help+*"),
		Action: &Action{Type: ActionReaction, ReactionID: ids.At("rct", t0)}})
	require.NoError(t, err)
	assert.Equal(t, int64(2), up.Revision)
	assert.Equal(t, "help+*", up.Match)
	assert.Equal(t, ActionReaction, up.Action.Type)
	assert.Empty(t, up.Action.To)
	assert.Equal(t, t0.Add(60e9), up.UpdatedAt)
	got, err := f.svc.GetRoute(ctx, f.bot, r.ID)
	require.NoError(t, err)
	assert.Equal(t, up, got)
	// The old match is free again.
	_, err = f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: d.ID, Match: "support", Action: &Action{Type: ActionStore}})
	require.NoError(t, err)

	// Moved to the other domain: the counters follow, so the first can be deleted once empty.
	moved, err := f.svc.UpdateRoute(ctx, f.bot, r.ID, RouteChange{ExpectedRevision: ptr(int64(2)), DomainID: &other.ID})
	require.NoError(t, err)
	assert.Equal(t, "example.org", moved.Domain)
	n, err := f.svc.domainRoutes(ctx, f.bot, other.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n.Count)

	err = f.svc.DeleteRoute(ctx, f.bot, r.ID, ptr(int64(2)))
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	require.NoError(t, f.svc.DeleteRoute(ctx, f.bot, r.ID, ptr(int64(3))))
	_, err = f.svc.GetRoute(ctx, f.bot, r.ID)
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)
	list, next, err := f.svc.ListRoutes(ctx, f.bot, 50, "")
	require.NoError(t, err)
	assert.Len(t, list, 2)
	assert.Empty(t, next)
}

func TestRouteLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d := f.verified(t, f.bot, "example.com")
	for i := range MaxRoutes {
		_, err := f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: d.ID, Match: fmt.Sprintf("box%d", i), Action: &Action{Type: ActionStore}})
		require.NoError(t, err)
	}
	_, err := f.svc.CreateRoute(ctx, f.bot, NewRoute{DomainID: d.ID, Match: "one-more", Action: &Action{Type: ActionStore}})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "limit_reached", he.Code)
	assert.Equal(t, MaxRoutes, he.Extensions["limit"])
	all, err := f.svc.allRoutes(ctx, f.bot)
	require.NoError(t, err)
	assert.Len(t, all, MaxRoutes)
}

func TestPickRoute(t *testing.T) {
	t.Parallel()
	routes := []InboundRoute{
		{ID: "all", DomainID: "d1", Match: "*"},
		{ID: "orders", DomainID: "d1", Match: "orders+*"},
		{ID: "orders-eu", DomainID: "d1", Match: "orders+eu*"},
		{ID: "support", DomainID: "d1", Match: "support"},
		{ID: "other", DomainID: "d2", Match: "support"},
	}
	cases := map[string]string{
		"support":     "support",
		"SUPPORT":     "support",
		"orders+42":   "orders",
		"orders+eu42": "orders-eu",
		"orders":      "all",
		"anyone":      "all",
	}
	for local, want := range cases {
		got := pick(routes, "d1", local)
		require.NotNil(t, got, local)
		assert.Equal(t, want, got.ID, local)
	}
	assert.Equal(t, "other", pick(routes, "d2", "support").ID)
	assert.Nil(t, pick(routes, "d2", "sales"))
}
