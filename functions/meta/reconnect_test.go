package meta

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	metafake "github.com/botplatform/api/tests/fakes/meta"
)

// consent starts a connection and follows its dialog: the pending connection's id and the
// query the callback gets.
func (f *fixture) consent(t *testing.T) (string, url.Values) {
	t.Helper()
	st, err := f.svc.Start(context.Background(), f.owner)
	require.NoError(t, err)
	q, err := crmfake.Consent(st.AuthorizeURL)
	require.NoError(t, err)
	return st.ID, q
}

// list is every connection of the account.
func (f *fixture) list(t *testing.T) []Connection {
	t.Helper()
	cs, next, err := f.svc.List(context.Background(), "acct_a", 100, "")
	require.NoError(t, err)
	require.Empty(t, next)
	return cs
}

// The same Facebook user connecting again (a token about to expire, an expired connection,
// "connect" clicked twice) updates the connection it has: same id, new token and expiry,
// permissions and assets read again (selection and attachments kept), revision incremented;
// the start's pending connection is gone, and the account has one connection.
func TestReconnectUpdatesInPlace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first := f.connect(t)
	ch := f.attach(t, first.ID)
	assetsBefore, err := f.svc.GetAssets(ctx, "acct_a", first.ID)
	require.NoError(t, err)
	// The token expires (Graph refuses it): the customer connects again.
	f.fake.RejectToken(f.fake.LongLived()[0])
	_, err = f.svc.Check(ctx, "acct_a", first.ID)
	require.Equal(t, "meta_token_rejected", httpapi.AsError(err).Code, "%v", err)
	expired, err := f.svc.Get(ctx, "acct_a", first.ID)
	require.NoError(t, err)
	require.Equal(t, StatusExpired, expired.Status)

	f.clock.Advance(RefreshWindow)
	f.fake.Decline("instagram_manage_messages")
	pendingID, q := f.consent(t)
	again, actor, err := f.svc.Callback(ctx, q)
	require.NoError(t, err)
	require.NotNil(t, actor)

	assert.Equal(t, first.ID, again.ID, "the same connection")
	assert.Equal(t, StatusActive, again.Status)
	assert.Empty(t, again.FailureReason)
	assert.Equal(t, expired.Revision+1, again.Revision)
	assert.Equal(t, first.CreatedAt, again.CreatedAt)
	require.NotNil(t, again.ExpiresAt)
	assert.True(t, again.ExpiresAt.After(*first.ExpiresAt), "the new token's expiry")
	assert.Equal(t, []string{"instagram_manage_messages"}, again.DeclinedPermissions, "permissions read again")
	assert.NotContains(t, again.GrantedPermissions, "instagram_manage_messages")
	stored, err := f.svc.Get(ctx, "acct_a", first.ID)
	require.NoError(t, err)
	assert.Equal(t, again, stored)

	// The new long-lived token is the connection's; the old one is not.
	tok, _, credRev, err := f.svc.token(ctx, "acct_a", first.ID)
	require.NoError(t, err)
	long := f.fake.LongLived()
	assert.Equal(t, long[len(long)-1], tok)
	assert.Equal(t, int64(2), credRev, "a new revision of the token, for the channels to be given it")

	// The assets were read again, what the customer decided on them kept.
	a, err := f.svc.GetAssets(ctx, "acct_a", first.ID)
	require.NoError(t, err)
	assert.Equal(t, assetsBefore.Revision+1, a.Revision)
	phone := a.WhatsAppBusinessAccounts[0].PhoneNumbers[0]
	assert.True(t, phone.Selected)
	assert.Equal(t, ch.ID, phone.ChannelID)

	// The start's pending connection was folded into it: one connection.
	_, err = f.svc.Get(ctx, "acct_a", pendingID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "%v", err)
	cs := f.list(t)
	require.Len(t, cs, 1)
	assert.Equal(t, first.ID, cs[0].ID)

	// The refresh job runs for it at once, and passes the new token on to its channel.
	msgs := f.queue.Sent()
	require.Len(t, msgs, 2)
	assert.Zero(t, msgs[1].Delay)
	assert.Contains(t, string(msgs[1].Body), first.ID)
	assert.Equal(t, f.chainPayload(t, first.ID), f.stepPayload(t, msgs[1]), "the step of the connection's new chain")
	_, _, err = f.svc.RefreshStep(ctx, f.stepPayload(t, msgs[1]), "")
	require.NoError(t, err)
	got, ok := f.chans.replacedOf(ch.ID)
	require.True(t, ok, "the attached channel was given the new token")
	assert.Equal(t, tok, got.AccessToken)
}

// Another Facebook user is another connection.
func TestAnotherUserIsAnotherConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.connect(t)
	f.fake.SignInAs(metafake.SecondUserID, metafake.SecondUserName)
	second := f.connect(t)
	assert.NotEqual(t, first.ID, second.ID)
	assert.Equal(t, metafake.SecondUserID, second.User.ID)
	assert.Len(t, f.list(t), 2)
	// And each of them connecting again updates their own.
	again := f.connect(t)
	assert.Equal(t, second.ID, again.ID)
	f.fake.SignInAs(metafake.UserID, metafake.UserName)
	again = f.connect(t)
	assert.Equal(t, first.ID, again.ID)
	assert.Len(t, f.list(t), 2)
}

// hookStore runs hook once, before the first transaction that stores a sealed token (a
// callback's activation): where a concurrent callback of the same user can land.
type hookStore struct {
	store.Store
	fired atomic.Bool
	hook  func()
}

func (s *hookStore) Transact(ctx context.Context, ws []store.Write) error {
	for _, w := range ws {
		if w.Put != nil && strings.HasPrefix(w.Put.SK, "CRED#") {
			if s.fired.CompareAndSwap(false, true) {
				s.hook() // the concurrent callback's own activation passes straight through
			}
			break
		}
	}
	return s.Store.Transact(ctx, ws)
}

// Two callbacks of the same Facebook user racing, neither seeing a connection of the user
// when it looked: the one that commits second finds the user taken (its conditional write
// fails) and updates the first one's connection instead. One connection, both callbacks
// answer it.
func TestConcurrentCallbacksOfOneUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, q1 := f.consent(t)
	_, q2 := f.consent(t)
	var second Connection
	f.svc.store = &hookStore{Store: f.st, hook: func() {
		var err error
		second, _, err = f.svc.Callback(ctx, q2)
		require.NoError(t, err)
	}}
	first, _, err := f.svc.Callback(ctx, q1)
	require.NoError(t, err)
	require.NotEmpty(t, second.ID, "the hook ran")

	assert.Equal(t, second.ID, first.ID, "the later commit updated the earlier one's connection")
	assert.Equal(t, second.Revision+1, first.Revision)
	cs := f.list(t)
	require.Len(t, cs, 1, "one connection for one Facebook user")
	assert.Equal(t, StatusActive, cs[0].Status)
	tok, _, _, err := f.svc.token(ctx, "acct_a", cs[0].ID)
	require.NoError(t, err)
	long := f.fake.LongLived()
	require.Len(t, long, 2)
	assert.Equal(t, long[0], tok, "the token of the callback that committed last (its exchange came first)")
}

// Real goroutines, same user: however they interleave, one connection.
func TestParallelCallbacksOfOneUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const n = 4
	qs := make([]url.Values, n)
	for i := range qs {
		_, qs[i] = f.consent(t)
		f.clock.Advance(StartLimit.Window) // the start limit
	}
	got := make([]Connection, n)
	var wg sync.WaitGroup
	for i := range qs {
		wg.Go(func() {
			c, _, err := f.svc.Callback(ctx, qs[i])
			assert.NoError(t, err)
			got[i] = c
		})
	}
	wg.Wait()
	cs := f.list(t)
	require.Len(t, cs, 1)
	for i := range got {
		assert.Equal(t, cs[0].ID, got[i].ID, "#%d", i)
	}
}

// Deleting a connection releases its user: the reservation goes in the same transaction,
// and the user's next connection is a new one.
func TestDeleteReleasesTheUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first := f.connect(t)
	ref, err := f.st.Get(ctx, userKey("acct_a", metafake.UserID))
	require.NoError(t, err, "the user is reserved for the connection")
	r, err := store.Decode[userRef](ref)
	require.NoError(t, err)
	assert.Equal(t, first.ID, r.ConnectionID)

	require.NoError(t, f.svc.Delete(ctx, "acct_a", first.ID))
	_, err = f.st.Get(ctx, userKey("acct_a", metafake.UserID))
	assert.ErrorIs(t, err, store.ErrNotFound, "the reservation went with the connection")
	next := f.connect(t)
	assert.NotEqual(t, first.ID, next.ID)
	assert.Equal(t, StatusActive, next.Status)
	assert.Len(t, f.list(t), 1)
}

// legacy makes connection id one of before the reservations: of user metaUser, and no
// reservation of any user names it.
func (f *fixture) legacy(t *testing.T, id, metaUser string) {
	t.Helper()
	ctx := context.Background()
	it, err := f.st.Get(ctx, connKey("acct_a", id))
	require.NoError(t, err)
	rec, err := store.Decode[record](it)
	require.NoError(t, err)
	require.NoError(t, f.st.Delete(ctx, userKey("acct_a", rec.User.ID), store.Always))
	rec.User.ID = metaUser
	it, err = item(it.Key, it.Revision, rec)
	require.NoError(t, err)
	require.NoError(t, f.st.Put(ctx, it, store.RevisionIs(it.Revision)))
}

// Connections made before the fix have no reservation: the user connecting again adopts
// the oldest of theirs (and reserves the user for it); a duplicate of then stays until it
// is deleted, which leaves the reservation of the adopted one alone.
func TestReconnectAdoptsTheOldestConnectionOfBefore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	oldest := f.connect(t)
	f.legacy(t, oldest.ID, metafake.UserID)
	f.fake.SignInAs(metafake.SecondUserID, metafake.SecondUserName)
	dup := f.connect(t)
	f.legacy(t, dup.ID, metafake.UserID) // the same user's second connection, from before
	require.Len(t, f.list(t), 2)

	f.fake.SignInAs(metafake.UserID, metafake.UserName)
	again := f.connect(t)
	assert.Equal(t, oldest.ID, again.ID, "the oldest adopted")
	assert.Greater(t, again.Revision, oldest.Revision)
	assert.Len(t, f.list(t), 2, "the duplicate of before stays")
	ref, err := f.st.Get(ctx, userKey("acct_a", metafake.UserID))
	require.NoError(t, err)
	r, err := store.Decode[userRef](ref)
	require.NoError(t, err)
	assert.Equal(t, oldest.ID, r.ConnectionID)

	require.NoError(t, f.svc.Delete(ctx, "acct_a", dup.ID))
	_, err = f.st.Get(ctx, userKey("acct_a", metafake.UserID))
	require.NoError(t, err, "the duplicate's delete keeps the adopted one's reservation")
	again = f.connect(t)
	assert.Equal(t, oldest.ID, again.ID)
	assert.Len(t, f.list(t), 1)
}

// A reconnection whose start was deleted before its callback is 404, and changes nothing.
func TestReconnectOfADeletedStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first := f.connect(t)
	pendingID, q := f.consent(t)
	require.NoError(t, f.svc.Delete(ctx, "acct_a", pendingID))
	_, _, err := f.svc.Callback(ctx, q)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "%v", err)
	got, err := f.svc.Get(ctx, "acct_a", first.ID)
	require.NoError(t, err)
	assert.Equal(t, first, got)
}
