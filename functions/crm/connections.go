package crm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// updateAttempts bounds how often a write that lost a race to a concurrent one is redone.
const updateAttempts = 4

// accountRef is the item that reserves a provider account for one connection of the bot.
type accountRef struct {
	ConnectionID string `json:"connection_id"`
}

func item(key store.Key, rev int64, v any) (store.Item, error) {
	b, err := store.Encode(v)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: key, Revision: rev, Data: b}, nil
}

// seal seals creds for connection id of bot.
func (s *Service) seal(ctx context.Context, bot, id string, creds crmapi.Credentials) ([]byte, error) {
	b, err := json.Marshal(creds)
	if err != nil {
		return nil, err
	}
	sealed, err := s.sealer.Seal(ctx, b, credAAD(bot, id))
	if err != nil {
		return nil, fmt.Errorf("crm: seal credentials: %w", err)
	}
	return sealed, nil
}

// open opens a connection's sealed credentials.
func (s *Service) open(ctx context.Context, bot, id string, rec credRecord) (crmapi.Credentials, error) {
	b, err := s.sealer.Open(ctx, rec.Sealed, credAAD(bot, id))
	if err != nil {
		return crmapi.Credentials{}, fmt.Errorf("crm: open credentials of %s: %w", id, err)
	}
	var creds crmapi.Credentials
	if err := json.Unmarshal(b, &creds); err != nil {
		return crmapi.Credentials{}, fmt.Errorf("crm: credentials of %s: %w", id, err)
	}
	return creds, nil
}

// connect stores a connection whose credentials were just proven against the provider: a
// new one (created), or, when the bot has a connection to the same provider account, that
// one with the new credentials, active again (a reconnection keeps the id and whatever
// hangs off it).
func (s *Service) connect(ctx context.Context, bot string, c Connection, creds crmapi.Credentials) (Connection, bool, error) {
	for range updateAttempts {
		now := stamp(s.now())
		c.ID, c.BotID, c.Status, c.Revision, c.CreatedAt, c.UpdatedAt = s.newID(), bot, StatusActive, 1, now, now
		sealed, err := s.seal(ctx, bot, c.ID, creds)
		if err != nil {
			return Connection{}, false, err
		}
		conn, err := item(connKey(bot, c.ID), 1, c)
		if err != nil {
			return Connection{}, false, err
		}
		cred, err := item(credKey(bot, c.ID), 1, credRecord{Sealed: sealed, Expiry: creds.Expiry, UpdatedAt: now})
		if err != nil {
			return Connection{}, false, err
		}
		ref, err := item(accountKey(bot, c.Provider, c.Account.ID), 1, accountRef{ConnectionID: c.ID})
		if err != nil {
			return Connection{}, false, err
		}
		err = s.store.Transact(ctx, []store.Write{store.PutOp(conn, store.MustNotExist), store.PutOp(cred, store.MustNotExist),
			store.PutOp(ref, store.MustNotExist)})
		if err == nil {
			return c, true, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return Connection{}, false, err
		}
		// The account is connected already: reconnect that connection.
		got, err := s.store.Get(ctx, accountKey(bot, c.Provider, c.Account.ID))
		if errors.Is(err, store.ErrNotFound) {
			continue // disconnected meanwhile
		}
		if err != nil {
			return Connection{}, false, err
		}
		r, err := store.Decode[accountRef](got)
		if err != nil {
			return Connection{}, false, err
		}
		out, err := s.reconnect(ctx, bot, r.ConnectionID, c, creds)
		if errors.Is(err, store.ErrConditionFailed) || httpapi.KindOf(err) == httpapi.KindNotFound {
			continue
		}
		return out, false, err
	}
	return Connection{}, false, httpapi.E(httpapi.KindConflict, "concurrent_update", "the connection changed concurrently too often; retry")
}

// reconnect gives connection id the new credentials and what the provider said.
func (s *Service) reconnect(ctx context.Context, bot, id string, c Connection, creds crmapi.Credentials) (Connection, error) {
	cur, err := s.load(ctx, bot, id)
	if err != nil {
		return Connection{}, err
	}
	credIt, err := s.store.Get(ctx, credKey(bot, id))
	if err != nil {
		return Connection{}, err
	}
	now := stamp(s.now())
	prev, was := cur.Revision, cur.entities()
	cur.Status, cur.Account, cur.AccountKey, cur.InstanceURL, cur.Login, cur.Entities = StatusActive, c.Account, c.AccountKey, c.InstanceURL, c.Login, c.Entities
	cur.Revision, cur.UpdatedAt = prev+1, now
	sealed, err := s.seal(ctx, bot, id, creds)
	if err != nil {
		return Connection{}, err
	}
	conn, err := item(connKey(bot, id), cur.Revision, cur)
	if err != nil {
		return Connection{}, err
	}
	cred, err := item(credKey(bot, id), credIt.Revision+1, credRecord{Sealed: sealed, Expiry: creds.Expiry, UpdatedAt: now})
	if err != nil {
		return Connection{}, err
	}
	err = s.store.Transact(ctx, []store.Write{store.PutOp(conn, store.RevisionIs(prev)), store.PutOp(cred, store.RevisionIs(credIt.Revision))})
	if err != nil {
		return Connection{}, err
	}
	if was != cur.entities() {
		// The objects and fields cached were another entity set's.
		s.eraseDiscovery(ctx, bot, id)
	}
	return cur, nil
}

// load reads a connection of bot; 404 for an unknown one.
func (s *Service) load(ctx context.Context, bot, id string) (Connection, error) {
	if !ids.Valid("crm", id) {
		return Connection{}, httpapi.NotFound("CRM connection")
	}
	it, err := s.store.Get(ctx, connKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Connection{}, httpapi.NotFound("CRM connection")
	}
	if err != nil {
		return Connection{}, err
	}
	c, err := store.Decode[Connection](it)
	c.Revision = it.Revision
	return c, err
}

// Get returns a connection of bot.
func (s *Service) Get(ctx context.Context, bot, id string) (Connection, error) {
	return s.load(ctx, bot, id)
}

// List returns a page of bot's connections, newest first.
func (s *Service) List(ctx context.Context, bot string, limit int, cursor string) ([]Connection, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: crmPK(bot), Prefix: connPrefix, Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Connection, 0, len(page.Items))
	for _, it := range page.Items {
		c, err := store.Decode[Connection](it)
		if err != nil {
			return nil, "", err
		}
		c.Revision = it.Revision
		out = append(out, c)
	}
	return out, page.Next, nil
}

// revokeTimeout bounds the revocation a disconnect asks the provider for.
const revokeTimeout = 10 * time.Second

// Delete disconnects: it asks the provider to revoke the credentials where it can (best
// effort: a provider that is down, or credentials already revoked, do not keep a
// connection), then removes the connection, its credentials and its account reservation.
func (s *Service) Delete(ctx context.Context, bot, id string) error {
	c, err := s.load(ctx, bot, id)
	if err != nil {
		return err
	}
	s.revoke(ctx, bot, c)
	err = s.store.Transact(ctx, []store.Write{
		store.DeleteOp(connKey(bot, id), store.MustExist),
		store.DeleteOp(credKey(bot, id), store.Always),
		store.DeleteOp(accountKey(bot, c.Provider, c.Account.ID), store.Always),
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return httpapi.NotFound("CRM connection") // deleted concurrently
	}
	if err == nil {
		s.eraseMapping(ctx, bot, id)
		s.eraseSync(ctx, bot, id)
	}
	return err
}

// revoke asks the provider to revoke c's credentials, logging what fails.
func (s *Service) revoke(ctx context.Context, bot string, c Connection) {
	it, err := s.store.Get(ctx, credKey(bot, c.ID))
	if err != nil {
		s.log.WarnContext(ctx, "crm: revoke: no credentials", "connection", c.ID, "error", err)
		return
	}
	rec, err := store.Decode[credRecord](it)
	if err != nil {
		s.log.WarnContext(ctx, "crm: revoke: credentials unreadable", "connection", c.ID, "error", err)
		return
	}
	creds, err := s.open(ctx, bot, c.ID, rec)
	if err != nil {
		s.log.WarnContext(ctx, "crm: revoke: credentials do not open", "connection", c.ID, "error", err)
		return
	}
	cl, err := s.newClient(c.Provider, creds, c.entities())
	if err != nil {
		s.log.WarnContext(ctx, "crm: revoke: no client", "connection", c.ID, "provider", c.Provider, "error", err)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, revokeTimeout)
	defer cancel()
	if err := cl.Revoke(rctx); err != nil {
		s.log.WarnContext(ctx, "crm: the provider did not revoke the credentials; disconnecting anyway", "connection", c.ID, "provider", c.Provider, "error", err)
	}
}

// markReconnect records that the provider refused c's credentials (best effort: the
// caller's error is the answer either way).
func (s *Service) markReconnect(ctx context.Context, bot, id string) {
	for range updateAttempts {
		c, err := s.load(ctx, bot, id)
		if err != nil || c.Status == StatusReconnectRequired {
			return
		}
		prev := c.Revision
		c.Status, c.Revision, c.UpdatedAt = StatusReconnectRequired, prev+1, stamp(s.now())
		it, err := item(connKey(bot, id), c.Revision, c)
		if err != nil {
			return
		}
		err = s.store.Put(ctx, it, store.RevisionIs(prev))
		if !errors.Is(err, store.ErrConditionFailed) {
			if err != nil {
				s.log.WarnContext(ctx, "crm: mark connection for reconnection", "connection", id, "error", err)
			}
			return
		}
	}
}
