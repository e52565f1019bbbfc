package crm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/oauth2"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// leaseTTL is how long a process may take to refresh a token before another may try: more
// than a token request takes (the provider client's timeout is 15 s).
const leaseTTL = 30 * time.Second

// leaseWait bounds how long a process waits for another's refresh, in real time.
const leaseWait = leaseTTL + 5*time.Second

// client returns the client of bot's connection id with an access token valid for at
// least refreshBefore (what the sync code calls before each batch of provider calls).
func (s *Service) client(ctx context.Context, bot, id string) (crmapi.Client, error) {
	c, err := s.load(ctx, bot, id)
	if err != nil {
		return nil, err
	}
	creds, err := s.credentials(ctx, bot, c)
	if err != nil {
		return nil, err
	}
	return s.newClient(c.Provider, creds, c.entities())
}

// needsRefresh reports whether creds need a new access token now.
func (s *Service) needsRefresh(c Connection, creds crmapi.Credentials) bool {
	if c.Auth == crmapi.AuthAPIKey {
		return false
	}
	return creds.AccessToken == "" || (!creds.Expiry.IsZero() && creds.Expiry.Before(s.now().Add(refreshBefore)))
}

// credentials opens c's credentials, refreshing the access token when it expires within
// refreshBefore. Refreshing is race-free across processes: the refresher first takes a
// lease on the credentials item (a conditional write on its revision), so that of several
// processes that find the token expiring exactly one asks the provider; the others wait
// for the lease's result and read the token it stored. Providers that rotate refresh
// tokens (Salesforce, HubSpot) would otherwise see the old refresh token used twice and
// could revoke the grant.
func (s *Service) credentials(ctx context.Context, bot string, c Connection) (crmapi.Credentials, error) {
	started := time.Now()
	wait := 10 * time.Millisecond
	for {
		it, err := s.store.Get(ctx, credKey(bot, c.ID))
		if errors.Is(err, store.ErrNotFound) {
			return crmapi.Credentials{}, httpapi.NotFound("CRM connection")
		}
		if err != nil {
			return crmapi.Credentials{}, err
		}
		rec, err := store.Decode[credRecord](it)
		if err != nil {
			return crmapi.Credentials{}, err
		}
		creds, err := s.open(ctx, bot, c.ID, rec)
		if err != nil {
			return crmapi.Credentials{}, err
		}
		if !s.needsRefresh(c, creds) {
			return creds, nil
		}
		now := s.now()
		if rec.LeaseUntil.After(now) {
			// Another process is refreshing: wait for what it stores.
			if time.Since(started) > leaseWait {
				return crmapi.Credentials{}, httpapi.E(httpapi.KindUnavailable, "provider_unavailable",
					"the connection's access token is being refreshed and the refresh has not finished; retry shortly")
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return crmapi.Credentials{}, ctx.Err()
			case <-t.C:
			}
			wait = min(2*wait, 250*time.Millisecond)
			continue
		}
		leased := rec
		leased.LeaseUntil = now.Add(leaseTTL)
		li, err := item(credKey(bot, c.ID), it.Revision+1, leased)
		if err != nil {
			return crmapi.Credentials{}, err
		}
		if err := s.store.Put(ctx, li, store.RevisionIs(it.Revision)); err != nil {
			if errors.Is(err, store.ErrConditionFailed) {
				continue // another process took the lease, or stored a token: read what it wrote
			}
			return crmapi.Credentials{}, err
		}
		return s.refreshLeased(ctx, bot, c, creds, li.Revision)
	}
}

// refreshLeased refreshes creds under the lease written at revision rev and stores the
// result (or, on failure, releases the lease).
func (s *Service) refreshLeased(ctx context.Context, bot string, c Connection, creds crmapi.Credentials, rev int64) (crmapi.Credentials, error) {
	next, err := s.refresh(ctx, c, creds)
	if err != nil {
		// Release the lease for the next try; the old credentials stay.
		if sealed, serr := s.seal(ctx, bot, c.ID, creds); serr == nil {
			if it, ierr := item(credKey(bot, c.ID), rev+1, credRecord{Sealed: sealed, Expiry: creds.Expiry, UpdatedAt: stamp(s.now())}); ierr == nil {
				_ = s.store.Put(context.WithoutCancel(ctx), it, store.RevisionIs(rev))
			}
		}
		if errors.Is(err, crmapi.ErrUnauthorized) {
			s.markReconnect(context.WithoutCancel(ctx), bot, c.ID)
		}
		return crmapi.Credentials{}, providerProblem(err)
	}
	sealed, err := s.seal(ctx, bot, c.ID, next)
	if err != nil {
		return crmapi.Credentials{}, err
	}
	it, err := item(credKey(bot, c.ID), rev+1, credRecord{Sealed: sealed, Expiry: next.Expiry, UpdatedAt: stamp(s.now())})
	if err != nil {
		return crmapi.Credentials{}, err
	}
	// Stored even if the caller has gone: the provider may have rotated the refresh token,
	// and the new one is the only one that works now.
	if err := s.store.Put(context.WithoutCancel(ctx), it, store.RevisionIs(rev)); err != nil {
		// The lease ran out and another process wrote meanwhile (or the connection was
		// deleted): this token is valid all the same, for this call.
		s.log.WarnContext(ctx, "crm: store refreshed credentials", "connection", c.ID, "error", err)
	}
	return next, nil
}

// refresh asks the provider for a new access token: the refresh-token grant of the OAuth
// providers, the client-credentials grant of Dataverse.
func (s *Service) refresh(ctx context.Context, c Connection, creds crmapi.Credentials) (crmapi.Credentials, error) {
	var (
		tok *oauth2.Token
		err error
	)
	switch c.Auth {
	case crmapi.AuthOAuth:
		cfg, ok := s.oauthConfig(c.Provider)
		if !ok {
			return crmapi.Credentials{}, errNotConfigured(c.Provider)
		}
		if creds.RefreshToken == "" {
			return crmapi.Credentials{}, fmt.Errorf("%w: the provider gave no refresh token", crmapi.ErrUnauthorized)
		}
		// An empty access token makes the token source refresh (its own clock decides
		// validity, and this one already decided).
		tok, err = cfg.TokenSource(s.httpContext(ctx), &oauth2.Token{RefreshToken: creds.RefreshToken}).Token()
	case crmapi.AuthOIDC:
		tok, err = s.clientCredentials(creds).Token(s.httpContext(ctx))
	default:
		return creds, nil
	}
	if err != nil {
		return crmapi.Credentials{}, tokenError(err)
	}
	if c.Provider == crmapi.Salesforce {
		// Salesforce names the org's instance in every token response; it is where the new
		// token goes, so it is checked as at the code exchange. Only Salesforce's is read: no
		// other token endpoint may move a connection's API elsewhere.
		inst, err := s.instanceURL(tok)
		if err != nil {
			return crmapi.Credentials{}, err
		}
		creds.InstanceURL = inst
	}
	creds.AccessToken, creds.Expiry = tok.AccessToken, tok.Expiry.UTC()
	if tok.RefreshToken != "" {
		creds.RefreshToken = tok.RefreshToken // rotated
	}
	return creds, nil
}
