package meta

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/oauthstate"
	"github.com/botplatform/api/shared/store"
)

// Started is the answer of a start: the pending connection and the Facebook Login dialog's
// URL, to open in the user's browser.
type Started struct {
	Connection
	// AuthorizeURL is the Facebook Login dialog for this deployment's app, with the scopes
	// and the single-use state.
	AuthorizeURL string `json:"authorize_url"`
	// StateExpiresAt is when the state stops being accepted by the callback.
	StateExpiresAt time.Time `json:"state_expires_at"`
}

// pending is a stored start, under the hash of its state.
type pending struct {
	ConnectionID string `json:"connection_id"`
	// Who started it: the callback, which has no token, acts and is audited as them.
	AccountID string         `json:"account_id"`
	UserID    string         `json:"user_id"`
	TokenID   string         `json:"token_id"`
	TokenKind auth.TokenKind `json:"token_kind"`
	CreatedAt time.Time      `json:"created_at"`
}

// oauthConfig is the x/oauth2 configuration of the deployment's Facebook app.
func (s *Service) oauthConfig() (*oauth2.Config, bool) {
	st := s.settings
	if !st.Configured() {
		return nil, false
	}
	return &oauth2.Config{ClientID: st.AppID, ClientSecret: st.AppSecret, RedirectURL: st.RedirectURL, Scopes: Scopes,
		Endpoint: oauth2.Endpoint{
			AuthURL:   st.DialogURL + "/" + st.Version + "/dialog/oauth",
			TokenURL:  st.GraphURL + "/" + st.Version + "/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams,
		}}, true
}

// Start begins a connection for the caller p: it stores a pending connection and a
// single-use state valid for StateTTL, and answers the dialog's URL.
func (s *Service) Start(ctx context.Context, p *auth.Principal) (Started, error) {
	cfg, ok := s.oauthConfig()
	if !ok {
		return Started{}, errNotConfigured
	}
	if s.limiter != nil {
		if err := s.limiter.AllowSliding(ctx, StartLimit, p.AccountID); err != nil {
			return Started{}, err
		}
	}
	state := oauthstate.New()
	now := s.now()
	expires := store.SecondsPrecision(now.Add(StateTTL))
	rec := record{Connection: Connection{ID: ids.At(idPrefix, now), Status: StatusPending, Revision: 1,
		CreatedAt: stamp(now), UpdatedAt: stamp(now)}, AccountID: p.AccountID, StateExpiresAt: expires}
	conn, err := item(connKey(p.AccountID, rec.ID), 1, rec)
	if err != nil {
		return Started{}, err
	}
	st, err := item(oauthstate.Key(stateFamily, state), 1, pending{ConnectionID: rec.ID, AccountID: p.AccountID, UserID: p.UserID,
		TokenID: p.TokenID, TokenKind: p.Kind, CreatedAt: now.UTC()})
	if err != nil {
		return Started{}, err
	}
	st.ExpiresAt = expires
	if err := s.store.Transact(ctx, []store.Write{store.PutOp(conn, store.MustNotExist), store.PutOp(st, store.MustNotExist)}); err != nil {
		return Started{}, fmt.Errorf("meta: store start: %w", err)
	}
	return Started{Connection: s.view(rec), AuthorizeURL: cfg.AuthCodeURL(state), StateExpiresAt: expires}, nil
}

// Actor is who a callback acts for: the start's caller.
type Actor struct {
	Principal *auth.Principal
}

// errInvalidState refuses a callback whose state is unknown, used or expired: they are told
// apart in no answer (an unknown state reveals nothing).
var errInvalidState = httpapi.E(httpapi.KindInvalid, "invalid_state",
	"the state is unknown, already used or older than 5 minutes: start the connection again")

// Callback finishes a start: it consumes the state (once), then, acting for the start's
// caller, exchanges the code for a token, that token for a long-lived one, reads who
// granted it, what they granted and their assets, seals the token and makes the connection
// active. When that Facebook user has a connection of the account already, it is that one
// that is updated and answered, and the start's pending connection is deleted (activate).
// A denied dialog, or any failure once the state is consumed, marks the connection
// failed with the reason (the state cannot be used again). The Actor is nil when the state
// did not authenticate the call.
func (s *Service) Callback(ctx context.Context, q url.Values) (Connection, *Actor, error) {
	pd, err := oauthstate.Consume(ctx, s.store, stateFamily, q.Get("state"), func(pd pending) bool {
		return s.now().Before(pd.CreatedAt.Add(StateTTL))
	})
	if errors.Is(err, oauthstate.ErrInvalid) {
		return Connection{}, nil, errInvalidState
	}
	if err != nil {
		return Connection{}, nil, err
	}
	actor := &Actor{Principal: &auth.Principal{AccountID: pd.AccountID, UserID: pd.UserID, TokenID: pd.TokenID, Kind: pd.TokenKind}}
	c, err := s.finish(ctx, pd, q)
	return c, actor, err
}

// finish is the callback once its state authenticated it.
func (s *Service) finish(ctx context.Context, pd pending, q url.Values) (Connection, error) {
	account, id := pd.AccountID, pd.ConnectionID
	if _, err := s.load(ctx, account, id); err != nil {
		return Connection{}, err // deleted since the start
	}
	if e := q.Get("error"); e != "" {
		reason := safeCode(q.Get("error_reason"))
		if reason == "" {
			reason = cmpOr(safeCode(e), "access_denied")
		}
		s.fail(ctx, account, id, StatusFailed, reason)
		return Connection{}, httpapi.E(httpapi.KindInvalid, "oauth_denied",
			"the Facebook Login dialog was not approved: start the connection again").With("provider_error", reason)
	}
	code := q.Get("code")
	if code == "" || len(code) > 4096 {
		s.fail(ctx, account, id, StatusFailed, "code_missing")
		return Connection{}, httpapi.InvalidParam("code", "Facebook's authorization code is missing or too long")
	}
	cfg, ok := s.oauthConfig()
	if !ok {
		s.fail(ctx, account, id, StatusFailed, "not_configured")
		return Connection{}, errNotConfigured
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, s.graph.http), code)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			s.fail(ctx, account, id, StatusFailed, "code_rejected")
			return Connection{}, httpapi.E(httpapi.KindUnprocessable, "oauth_code_rejected",
				"Facebook refused the authorization code (used, expired, or issued for another redirect URI): start the connection again")
		}
		s.fail(ctx, account, id, StatusFailed, "provider_unavailable")
		return Connection{}, httpapi.E(httpapi.KindUnavailable, "provider_unavailable",
			"Facebook's token endpoint could not be reached or failed; start the connection again shortly")
	}
	long, expiry, err := s.graph.exchange(ctx, tok.AccessToken, s.now())
	if err != nil {
		s.fail(ctx, account, id, StatusFailed, "token_exchange_failed")
		return Connection{}, graphProblem(err)
	}
	fetched, err := s.fetch(ctx, long)
	if err != nil {
		s.fail(ctx, account, id, StatusFailed, "assets_unreadable")
		return Connection{}, graphProblem(err)
	}
	// The user's id keys their connection (userKey): Graph's ids are numeric.
	if !graphID.MatchString(fetched.User.ID) {
		s.fail(ctx, account, id, StatusFailed, "user_unreadable")
		return Connection{}, httpapi.E(httpapi.KindUnavailable, "provider_unavailable",
			"the Graph API did not answer who granted the token; start the connection again shortly")
	}
	c, reconnected, err := s.activate(ctx, account, id, long, expiry, fetched)
	if err != nil {
		return Connection{}, err
	}
	if reconnected {
		s.log.InfoContext(ctx, "meta: the Facebook user connected again: their connection updated, the start's pending one deleted",
			"connection", c.ID, "pending", id)
	}
	// activate started the connection's refresh chain, a reconnection's too: its channels get
	// the new token at once (the chain's first step passes it on).
	return c, nil
}

// graphProblem maps a Graph failure to the API's answer: never Graph's message, only its code.
func graphProblem(err error) error {
	var ge *graphError
	switch {
	case err == nil:
		return nil
	case tokenRejected(err):
		return httpapi.E(httpapi.KindUnprocessable, "meta_token_rejected",
			"Facebook refused the connection's token (expired, revoked, or the password changed): connect again").Wrap(err)
	case temporary(err):
		return httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the Graph API could not be reached or failed; retry shortly").Wrap(err)
	case errors.As(err, &ge):
		return httpapi.Errorf(httpapi.KindUnprocessable, "meta_request_rejected", "the Graph API refused the request (HTTP %d)", ge.Status).
			With("provider_code", ge.Code).Wrap(err)
	}
	return err
}
