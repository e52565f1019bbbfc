package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// updateAttempts bounds how often a write that lost a race to a concurrent one is redone.
const updateAttempts = 4

func notFound() error { return httpapi.NotFound("Meta connection") }

// load reads a connection of account; 404 for an unknown one.
func (s *Service) load(ctx context.Context, account, id string) (record, error) {
	if !ids.Valid(idPrefix, id) {
		return record{}, notFound()
	}
	it, err := s.store.Get(ctx, connKey(account, id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, notFound()
	}
	if err != nil {
		return record{}, err
	}
	rec, err := store.Decode[record](it)
	rec.Revision = it.Revision
	return rec, err
}

// Get returns a connection of account.
func (s *Service) Get(ctx context.Context, account, id string) (Connection, error) {
	rec, err := s.load(ctx, account, id)
	if err != nil {
		return Connection{}, err
	}
	return s.view(rec), nil
}

// List returns a page of account's connections, newest first.
func (s *Service) List(ctx context.Context, account string, limit int, cursor string) ([]Connection, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: metaPK(account), Prefix: connPrefix, Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Connection, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[record](it)
		if err != nil {
			return nil, "", err
		}
		rec.Revision = it.Revision
		out = append(out, s.view(rec))
	}
	return out, page.Next, nil
}

// update applies change to connection id under its revision, redoing it when another write
// came first; change returns false to leave the connection as it is.
func (s *Service) update(ctx context.Context, account, id string, change func(*record) bool) (record, error) {
	for range updateAttempts {
		rec, err := s.load(ctx, account, id)
		if err != nil {
			return record{}, err
		}
		if !change(&rec) {
			return rec, nil
		}
		prev := rec.Revision
		rec.Revision, rec.UpdatedAt = prev+1, stamp(s.now())
		it, err := item(connKey(account, id), rec.Revision, rec)
		if err != nil {
			return record{}, err
		}
		err = s.store.Put(ctx, it, store.RevisionIs(prev))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		return rec, err
	}
	return record{}, httpapi.E(httpapi.KindConflict, "concurrent_update", "the connection changed concurrently too often; retry")
}

// fail marks a connection failed or expired with reason (best effort: the caller's error is
// the answer either way).
func (s *Service) fail(ctx context.Context, account, id, status, reason string) {
	_, err := s.update(context.WithoutCancel(ctx), account, id, func(r *record) bool {
		if r.Status == status && r.FailureReason == reason {
			return false
		}
		r.Status, r.FailureReason = status, reason
		return true
	})
	if err != nil && httpapi.KindOf(err) != httpapi.KindNotFound {
		s.log.WarnContext(ctx, "meta: mark connection", "connection", id, "status", status, "error", err)
	}
}

// errGone is what a reconnection returns when the connection the user's reservation named
// was deleted meanwhile: the callback looks again.
var errGone = errors.New("meta: the user's connection was deleted meanwhile")

// activate stores what the callback of the pending connection id read under the connection
// of the Facebook user who granted it: a connection is identified by the account and the
// Meta user id (userKey). The user's first time, the pending connection becomes active and
// reserves the user (MustNotExist, in the same transaction). When the user has a connection
// already, that one is updated in place (reconnect) and the pending one deleted. Of two
// callbacks of one user racing, the second to commit finds the user reserved (its condition
// fails) and looks again: it reconnects into the first one's connection. It reports whether
// it reconnected.
//
// Either way the connection gets a new refresh chain (RefreshChain), whose first step is
// staged in the same transaction (newChain): the previous chain of a reconnected connection
// ends at its next step. activate sends that first step once the transaction has committed
// (the outbox's sweep sends it if that fails): a connection never commits without it.
func (s *Service) activate(ctx context.Context, account, id, token string, expiry time.Time, f fetched) (Connection, bool, error) {
	for range updateAttempts {
		target, refRev, err := s.connectionOf(ctx, account, f.User.ID, id)
		if err != nil {
			return Connection{}, false, err
		}
		var c Connection
		var deliver func(context.Context)
		if target == "" {
			c, deliver, err = s.activatePending(ctx, account, id, token, expiry, f)
		} else {
			c, deliver, err = s.reconnect(ctx, account, target, refRev, id, token, expiry, f)
		}
		if errors.Is(err, store.ErrConditionFailed) || errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return Connection{}, false, err
		}
		deliver(ctx)
		return c, target != "", nil
	}
	return Connection{}, false, httpapi.E(httpapi.KindConflict, "concurrent_update", "the connection changed concurrently too often; retry")
}

// connectionOf finds the connection of the Facebook user metaUser, other than the pending
// one: the one its reservation names, with the reservation's revision; "" for none.
// Connections made before reservations existed have none: the oldest connection of the
// user is adopted (0: the reconnection writes its reservation). Its duplicates, if the user
// connected more than once then, stay as they are until deleted.
func (s *Service) connectionOf(ctx context.Context, account, metaUser, pending string) (string, int64, error) {
	it, err := s.store.Get(ctx, userKey(account, metaUser))
	if err == nil {
		ref, err := store.Decode[userRef](it)
		return ref.ConnectionID, it.Revision, err
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", 0, err
	}
	// Oldest first: connection ids sort by creation time.
	q := store.Query{PK: metaPK(account), Prefix: connPrefix, Limit: 100}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return "", 0, err
		}
		for _, it := range page.Items {
			rec, err := store.Decode[record](it)
			if err != nil {
				return "", 0, err
			}
			if rec.User != nil && rec.User.ID == metaUser && rec.ID != pending {
				return rec.ID, 0, nil
			}
		}
		if page.Next == "" {
			return "", 0, nil
		}
		q.Cursor = page.Next
	}
}

// activatePending makes the pending connection id active with the sealed token and the
// fetched assets, and reserves its user for it; it names the connection's refresh chain and
// stages its first step, which deliver sends once the caller saw the transaction commit.
func (s *Service) activatePending(ctx context.Context, account, id, token string, expiry time.Time, f fetched) (Connection, func(context.Context), error) {
	sealed, err := s.sealer.Seal(ctx, []byte(token), credAAD(account, id))
	if err != nil {
		return Connection{}, nil, fmt.Errorf("meta: seal token: %w", err)
	}
	rec, err := s.load(ctx, account, id)
	if err != nil {
		return Connection{}, nil, err
	}
	chain, chainWrites, deliver, err := s.newChain(account, id, 0)
	if err != nil {
		return Connection{}, nil, err
	}
	now := stamp(s.now())
	prev := rec.Revision
	rec.granted(f, expiry, counts(f.Assets), now)
	rec.RefreshChain = chain
	conn, err := item(connKey(account, id), rec.Revision, rec)
	if err != nil {
		return Connection{}, nil, err
	}
	cred, err := item(credKey(account, id), 1, credRecord{Sealed: sealed, Expiry: expiry.UTC(), UpdatedAt: now})
	if err != nil {
		return Connection{}, nil, err
	}
	assets, err := item(assetsKey(account, id), 1, assetsRecord{Assets: f.Assets, Truncated: f.Truncated, RefreshedAt: now})
	if err != nil {
		return Connection{}, nil, err
	}
	ref, err := item(userKey(account, f.User.ID), 1, userRef{ConnectionID: id})
	if err != nil {
		return Connection{}, nil, err
	}
	writes := append([]store.Write{store.PutOp(conn, store.RevisionIs(prev)),
		store.PutOp(cred, store.Always), store.PutOp(assets, store.Always), store.PutOp(ref, store.MustNotExist)}, chainWrites...)
	if err := s.store.Transact(ctx, writes); err != nil {
		return Connection{}, nil, err
	}
	return s.view(rec), deliver, nil
}

// reconnect updates the user's connection target in place with what the callback of the
// pending connection read: the new token (a new revision, which the refresh job passes on
// to the channels attached from it), its expiry, the permissions, the assets read again
// (selection and attachments kept, as a check keeps them); active again, revision
// incremented. In the same transaction the pending connection is deleted and the user's
// reservation checked (refRev), or written for a connection that had none (refRev 0), and
// the connection's refresh chain replaced by a new one whose first step is staged (deliver
// sends it once the caller saw the transaction commit): the previous chain's next step ends.
func (s *Service) reconnect(ctx context.Context, account, target string, refRev int64, pending, token string, expiry time.Time, f fetched) (Connection, func(context.Context), error) {
	rec, err := s.load(ctx, account, target)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return Connection{}, nil, errGone
	}
	if err != nil {
		return Connection{}, nil, err
	}
	pend, err := s.load(ctx, account, pending)
	if err != nil {
		return Connection{}, nil, err // deleted since the start: 404
	}
	sealed, err := s.sealer.Seal(ctx, []byte(token), credAAD(account, target))
	if err != nil {
		return Connection{}, nil, fmt.Errorf("meta: seal token: %w", err)
	}
	credCond, credRev := store.MustNotExist, int64(1)
	switch it, err := s.store.Get(ctx, credKey(account, target)); {
	case err == nil:
		credCond, credRev = store.RevisionIs(it.Revision), it.Revision+1
	case !errors.Is(err, store.ErrNotFound):
		return Connection{}, nil, err
	}
	assetsCond, assetsRev := store.MustNotExist, int64(1)
	ar, arRev, err := s.loadAssets(ctx, account, target)
	switch {
	case err == nil:
		assetsCond, assetsRev = store.RevisionIs(arRev), arRev+1
	case !errors.Is(err, errNoAssets):
		return Connection{}, nil, err
	}
	now := stamp(s.now())
	ar.Assets, ar.Truncated, ar.RefreshedAt = merge(ar.Assets, f.Assets), f.Truncated, now

	chain, chainWrites, deliver, err := s.newChain(account, target, 0)
	if err != nil {
		return Connection{}, nil, err
	}
	prev := rec.Revision
	rec.granted(f, expiry, counts(ar.Assets), now)
	rec.RefreshChain = chain
	conn, err := item(connKey(account, target), rec.Revision, rec)
	if err != nil {
		return Connection{}, nil, err
	}
	cred, err := item(credKey(account, target), credRev, credRecord{Sealed: sealed, Expiry: expiry.UTC(), UpdatedAt: now})
	if err != nil {
		return Connection{}, nil, err
	}
	assets, err := item(assetsKey(account, target), assetsRev, ar)
	if err != nil {
		return Connection{}, nil, err
	}
	writes := []store.Write{store.PutOp(conn, store.RevisionIs(prev)), store.PutOp(cred, credCond), store.PutOp(assets, assetsCond),
		store.DeleteOp(connKey(account, pending), store.RevisionIs(pend.Revision))}
	if refRev > 0 {
		writes = append(writes, store.CheckOp(userKey(account, f.User.ID), store.RevisionIs(refRev)))
	} else {
		ref, err := item(userKey(account, f.User.ID), 1, userRef{ConnectionID: target})
		if err != nil {
			return Connection{}, nil, err
		}
		writes = append(writes, store.PutOp(ref, store.MustNotExist))
	}
	writes = append(writes, chainWrites...)
	if err := s.store.Transact(ctx, writes); err != nil {
		return Connection{}, nil, err
	}
	return s.view(rec), deliver, nil
}

// granted makes rec the active connection of what a callback read (f, the token's expiry,
// the asset counts kept), at its next revision.
func (rec *record) granted(f fetched, expiry time.Time, assets Counts, now time.Time) {
	rec.Status, rec.FailureReason, rec.User = StatusActive, "", &f.User
	rec.GrantedPermissions, rec.DeclinedPermissions = f.Granted, f.Declined
	rec.ExpiresAt, rec.RefreshedAt = expiryPtr(expiry), &now
	rec.AssetCounts = assets
	rec.Revision, rec.UpdatedAt = rec.Revision+1, now
}

func expiryPtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = stamp(t)
	return &t
}

// errNoToken is what credential wraps for a connection that holds no token (never active).
var errNoToken = errors.New("meta: the connection holds no token")

// token opens the long-lived token of connection id.
func (s *Service) token(ctx context.Context, account, id string) (string, credRecord, int64, error) {
	cr, rev, err := s.credential(ctx, account, id)
	if err != nil {
		return "", credRecord{}, 0, err
	}
	tok, err := s.openToken(ctx, account, id, cr)
	return tok, cr, rev, err
}

// credential reads the connection's sealed token and its revision without opening it.
func (s *Service) credential(ctx context.Context, account, id string) (credRecord, int64, error) {
	it, err := s.store.Get(ctx, credKey(account, id))
	if errors.Is(err, store.ErrNotFound) {
		return credRecord{}, 0, httpapi.E(httpapi.KindConflict, "connection_not_active", "the connection holds no token: connect again").
			Wrap(errNoToken)
	}
	if err != nil {
		return credRecord{}, 0, err
	}
	cr, err := store.Decode[credRecord](it)
	return cr, it.Revision, err
}

// openToken opens a sealed token (a KMS call on AWS).
func (s *Service) openToken(ctx context.Context, account, id string, cr credRecord) (string, error) {
	b, err := s.sealer.Open(ctx, cr.Sealed, credAAD(account, id))
	if err != nil {
		return "", fmt.Errorf("meta: open token of %s: %w", id, err)
	}
	return string(b), nil
}

// revokeTimeout bounds the revocation a delete asks Graph for.
const revokeTimeout = 10 * time.Second

// Delete removes a connection, its sealed token and its assets, then asks Graph to revoke
// the app's permissions for the user (DELETE /me/permissions, best effort: Graph being down,
// or the token already refused, do not keep a connection).
//
// The revocation invalidates every token the user gave the app, the one the channels
// attached from the connection's numbers hold included: while such a channel exists the
// delete is refused (409 connection_in_use, channel_ids), as Stripe refuses to delete a
// product that still has prices; the customer disconnects them first (the channels routes).
// A channel disconnected since, or purged with its bot, does not count: each is looked up. The
// deletion is conditional on the assets' revision, so an attachment recorded between the
// look-up and the deletion fails it (409 concurrent_update) rather than lose its token; and
// the revocation comes last, so a refused delete revokes nothing.
func (s *Service) Delete(ctx context.Context, account, id string) error {
	rec, err := s.load(ctx, account, id)
	if err != nil {
		return err
	}
	assetsCond := store.MustNotExist
	ar, arRev, err := s.loadAssets(ctx, account, id)
	switch {
	case errors.Is(err, errNoAssets): // never active: nothing attached
	case err != nil:
		return err
	default:
		assetsCond = store.RevisionIs(arRev)
		inUse, err := s.attachedChannels(ctx, ar)
		if err != nil {
			return err
		}
		if len(inUse) > 0 {
			return httpapi.Errorf(httpapi.KindConflict, "connection_in_use",
				"channels attached from this connection hold its token, which deleting the connection revokes: "+
					"disconnect them first (DELETE /api/bots/{botID}/channels/{channelID}); %d left", len(inUse)).
				With("channel_ids", inUse)
		}
	}
	// The token is read before it is deleted, for the revocation after.
	tok, _, _, tokErr := s.token(ctx, account, id)
	if tokErr != nil && !errors.Is(tokErr, errNoToken) {
		s.log.WarnContext(ctx, "meta: the token of a deleted connection cannot be opened; not revoked", "connection", id, "error", tokErr)
	}
	writes := []store.Write{
		store.DeleteOp(connKey(account, id), store.RevisionIs(rec.Revision)),
		store.DeleteOp(credKey(account, id), store.Always),
		store.DeleteOp(assetsKey(account, id), assetsCond),
	}
	// The user's reservation goes with the connection it names (the user can connect anew).
	// A connection made before reservations existed may have none, or be a duplicate whose
	// user's reservation names another one: that one is left alone.
	if rec.User != nil {
		ref, err := s.store.Get(ctx, userKey(account, rec.User.ID))
		switch {
		case err == nil:
			r, err := store.Decode[userRef](ref)
			if err != nil {
				return err
			}
			if r.ConnectionID == id {
				writes = append(writes, store.DeleteOp(ref.Key, store.RevisionIs(ref.Revision)))
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
	}
	err = s.store.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return httpapi.E(httpapi.KindConflict, "concurrent_update", "the connection changed while it was being deleted; retry")
	}
	if err != nil {
		return err
	}
	if tokErr == nil {
		// Deleted whatever Graph answers, so the caller's going away does not cut it short.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
		defer cancel()
		if err := s.graph.delete(rctx, tok, "me/permissions"); err != nil {
			s.log.WarnContext(ctx, "meta: Graph did not revoke the permissions of a deleted connection", "connection", id, "error", err)
		}
	}
	return nil
}

// attachedChannels are the channels attached from ar's assets that still exist, by id. A
// channel the channels family no longer has (disconnected, or purged with its bot) is not
// one. Without the channels family (no key to seal channel credentials with) nothing can
// be looked up: every recorded attachment counts.
func (s *Service) attachedChannels(ctx context.Context, ar assetsRecord) ([]string, error) {
	out := []string{}
	for _, a := range ar.Assets {
		if a.ChannelID == "" {
			continue
		}
		if s.channels == nil {
			out = append(out, a.ChannelID)
			continue
		}
		_, err := s.channels.Get(ctx, a.BotID, a.ChannelID)
		switch {
		case err == nil:
			out = append(out, a.ChannelID)
		case httpapi.KindOf(err) != httpapi.KindNotFound:
			return nil, fmt.Errorf("meta: look up attached channel %s: %w", a.ChannelID, err)
		}
	}
	return out, nil
}
