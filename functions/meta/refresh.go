package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// JobRefresh is the job kind that keeps one connection's long-lived token fresh: it runs
// when the token is within RefreshWindow of its expiry, exchanges it for a new one
// (fb_exchange_token with the current token), seals it and schedules itself again for the
// new token. The callback starts it; each step hands it on to the next (handOn), due when
// the token will be, through the queue's delayed messages (EventBridge Scheduler beyond 15
// minutes on AWS, the local queue's due time locally).
//
// A connection has one live chain of such steps: the one its record names (RefreshChain).
// The callback names a new chain in the very transaction that activates or reconnects the
// connection, and stages that chain's first step in it through the outbox, so the chain is
// neither lost (a crash or a queue refusing after the commit: the outbox's sweep sends it)
// nor doubled (the previous chain's next step finds another chain named and ends). Each
// step names the chain anew as it hands it on, so a step the queue delivers twice runs once.
const JobRefresh = "meta.refresh"

// retryLater is when a refresh Graph refused for a reason other than the token (a bad app
// configuration, a policy block) is tried again.
const retryLater = 6 * time.Hour

// chainPrefix prefixes refresh chain ids.
const chainPrefix = "mrc"

// refreshPayload names the connection a refresh job keeps, and the chain it belongs to.
type refreshPayload struct {
	Account    string `json:"account"`
	Connection string `json:"connection"`
	// Chain is the chain the step belongs to: it runs only while the connection's record
	// names it. Empty in the steps queued before chains were named: such a step adopts a
	// connection whose record names no chain either (handOn), and ends otherwise.
	Chain string `json:"chain,omitempty"`
}

// Steps are the family's job kinds.
func (s *Service) Steps() map[string]jobs.Step {
	return map[string]jobs.Step{JobRefresh: s.RefreshStep}
}

// newChain returns a new chain id and the writes that stage its first step (due after
// delay) in the transaction of the connection write that names it, with the function that
// sends it once that transaction has committed (the outbox's sweep sends it if that fails).
// Without an outbox (a process with no queue) nothing is staged, and deliver logs that the
// connection's token will not be refreshed.
func (s *Service) newChain(account, id string, delay time.Duration) (string, []store.Write, func(context.Context), error) {
	chain := ids.At(chainPrefix, s.now())
	if s.outbox == nil {
		return chain, nil, func(ctx context.Context) {
			s.log.WarnContext(ctx, "meta: this process has no queue: the connection's token will not be refreshed", "connection", id)
		}, nil
	}
	delay = min(max(delay, 0), queue.MaxScheduledDelay)
	m, err := jobs.StartMessage(delay, JobRefresh, refreshPayload{Account: account, Connection: id, Chain: chain})
	if err != nil {
		return "", nil, nil, err
	}
	writes, deliver, err := s.outbox.Stage(m)
	if err != nil {
		return "", nil, nil, fmt.Errorf("meta: stage the token refresh: %w", err)
	}
	return chain, writes, deliver, nil
}

// RefreshStep runs one refresh of a connection (one step; the job is done after it). A
// connection gone or no longer active ends it, and so does a step of a chain other than the
// connection's (superseded by a reconnection, or already run: a second delivery); a step
// from before chains were named adopts a connection that names none (handOn). A token not
// yet due hands the chain on to a step when it is; a token Graph refuses (code 190) marks
// the connection expired; a temporary failure, or a hand-on the store refuses, fails the
// step, which the queue retries.
func (s *Service) RefreshStep(ctx context.Context, payload json.RawMessage, _ string) (string, bool, error) {
	var p refreshPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", true, fmt.Errorf("meta: refresh payload: %w", err)
	}
	rec, err := s.load(ctx, p.Account, p.Connection)
	if err != nil || rec.Status != StatusActive {
		return "", true, nil // deleted, or failed/expired: nothing to keep fresh
	}
	switch {
	case rec.RefreshChain == "":
		return "", true, s.handOn(ctx, p, 0) // adoption
	case p.Chain != rec.RefreshChain:
		return "", true, nil // another chain keeps this connection: this one ends here
	}
	// First the channels still on an older token (a run that refreshed the token and then
	// failed to pass it on is retried by the queue and resumes here).
	if err := s.passOn(ctx, p.Account, p.Connection); err != nil {
		return "", false, err
	}
	tok, cr, rev, err := s.token(ctx, p.Account, p.Connection)
	if err != nil {
		return "", true, nil
	}
	if cr.Expiry.IsZero() {
		return "", true, nil // a token that does not expire
	}
	now := s.now()
	if due := cr.Expiry.Add(-RefreshWindow); now.Before(due) {
		if err := s.handOn(ctx, p, due.Sub(now)); err != nil {
			return "", false, err
		}
		return "", true, nil
	}
	next, expiry, err := s.graph.exchange(ctx, tok, now)
	switch {
	case err == nil:
	case tokenRejected(err):
		s.fail(ctx, p.Account, p.Connection, StatusExpired, "token_rejected")
		return "", true, nil
	case temporary(err):
		return "", false, err // the queue retries the step
	default:
		s.log.WarnContext(ctx, "meta: Graph refused the token refresh; retrying later", "connection", p.Connection, "error", err)
		if err := s.handOn(ctx, p, retryLater); err != nil {
			return "", false, err
		}
		return "", true, nil
	}
	if err := s.storeRefreshed(ctx, p.Account, p.Connection, next, expiry, rev); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return "", true, nil // deleted, or another refresh stored a token meanwhile
		}
		return "", false, err
	}
	if err := s.passOn(ctx, p.Account, p.Connection); err != nil {
		return "", false, err
	}
	if !expiry.IsZero() {
		// A failure here is retried from the top: the token is fresh by then, so the retry
		// only hands on.
		if err := s.handOn(ctx, p, nextRefresh(now, expiry)); err != nil {
			return "", false, err
		}
	}
	return "", true, nil
}

// handOn ends p's step by handing its chain on: the connection's record names a new chain,
// whose first step, due after delay, is staged through the outbox in the same conditional
// write. A second delivery of the same step (queues deliver at least once) then finds its
// chain superseded and ends, rather than doubling the chain; a retry of a step that failed
// before the write still finds its own chain and hands it on. A queue refusing after the
// write loses nothing: the outbox's sweep sends the step.
//
// A step from before chains were named (p.Chain empty) on a connection whose record names
// none either (one of then, whose steps in the queue carry no chain and may be several:
// each reconnection of then started one) hands on at once (adoption): the first of them to
// run names a chain, and the others, finding one named that is not theirs, end. A write that
// loses to a concurrent one looks again.
func (s *Service) handOn(ctx context.Context, p refreshPayload, delay time.Duration) error {
	for range updateAttempts {
		rec, err := s.load(ctx, p.Account, p.Connection)
		if err != nil || rec.Status != StatusActive || rec.RefreshChain != p.Chain {
			return nil // gone, inactive, or handed on meanwhile
		}
		chain, writes, deliver, err := s.newChain(p.Account, p.Connection, delay)
		if err != nil {
			return err
		}
		prev := rec.Revision
		rec.RefreshChain, rec.Revision, rec.UpdatedAt = chain, prev+1, stamp(s.now())
		it, err := item(connKey(p.Account, p.Connection), rec.Revision, rec)
		if err != nil {
			return err
		}
		err = s.store.Transact(context.WithoutCancel(ctx), append([]store.Write{store.PutOp(it, store.RevisionIs(prev))}, writes...))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return err
		}
		if p.Chain == "" {
			s.log.InfoContext(ctx, "meta: a refresh step of before chains were named adopted its connection", "connection", p.Connection)
		}
		deliver(ctx)
		return nil
	}
	return fmt.Errorf("meta: hand on the refresh of %s: the connection changed concurrently too often", p.Connection)
}

// passOn gives the connection's current token to the channels attached from its assets that
// hold an older one (channels.Service.ReplaceCredentials, which checks it with WhatsApp).
// A channel gone since is forgotten; one that refuses the token for good (its number moved
// to another account) is logged and tried again on the next refresh; a temporary failure
// is returned, for the queue to retry the step.
func (s *Service) passOn(ctx context.Context, account, id string) error {
	if s.channels == nil {
		return nil
	}
	ar, _, err := s.loadAssets(ctx, account, id)
	if errors.Is(err, errNoAssets) {
		return nil // no assets: nothing attached
	}
	if err != nil {
		return err
	}
	// The token's revision first: the token is opened (a KMS call on AWS) only when some
	// channel holds an older one, which is rare.
	cr, rev, err := s.credential(ctx, account, id)
	if errors.Is(err, errNoToken) {
		return nil // no token: nothing to pass on
	}
	if err != nil {
		return err
	}
	var stale []Asset
	for _, a := range ar.Assets {
		if a.ChannelID != "" && a.Kind == KindPhone && ar.ChannelTokens[a.ID] < rev {
			stale = append(stale, a)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	tok, err := s.openToken(ctx, account, id, cr)
	if err != nil {
		return err
	}
	done := map[string]int64{} // asset id -> the revision its channel now holds (0: gone)
	var errs []error
	for _, a := range stale {
		waba := strings.TrimPrefix(a.ParentID, idPrefixes[KindWABA]+":")
		_, err := s.channels.ReplaceCredentials(ctx, a.BotID, a.ChannelID,
			&whatsapp.Credentials{AccessToken: tok, PhoneNumberID: a.GraphID, BusinessAccountID: waba})
		switch kind := httpapi.KindOf(err); {
		case err == nil:
			done[a.ID] = rev
		case kind == httpapi.KindNotFound:
			done[a.ID] = 0
		case kind == httpapi.KindUnavailable || kind == httpapi.KindInternal:
			errs = append(errs, fmt.Errorf("meta: pass the refreshed token to channel %s: %w", a.ChannelID, err))
		default:
			s.log.WarnContext(ctx, "meta: a channel refused the refreshed token", "connection", id, "channel", a.ChannelID, "error", err)
		}
	}
	if len(done) > 0 {
		_, _, err := s.saveAssets(ctx, account, id, func(ar *assetsRecord) {
			for j := range ar.Assets {
				rev, ok := done[ar.Assets[j].ID]
				if !ok {
					continue
				}
				if ar.ChannelTokens == nil {
					ar.ChannelTokens = map[string]int64{}
				}
				if rev == 0 {
					delete(ar.ChannelTokens, ar.Assets[j].ID)
					ar.Assets[j].ChannelID, ar.Assets[j].BotID = "", ""
				} else {
					ar.ChannelTokens[ar.Assets[j].ID] = rev
				}
			}
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// minInterval is the shortest wait between two refreshes of a token that Graph gives less
// than RefreshWindow to live: without it such a token would be exchanged again at once,
// forever.
const minInterval = 24 * time.Hour

// nextRefresh is how long after now a token expiring at expiry is refreshed: RefreshWindow
// before its expiry, but not sooner than minInterval (or half its remaining life, for one
// that lives less).
func nextRefresh(now, expiry time.Time) time.Duration {
	d := expiry.Add(-RefreshWindow).Sub(now)
	if d < minInterval {
		d = min(minInterval, expiry.Sub(now)/2)
	}
	return max(d, 0)
}

// storeRefreshed seals and stores a refreshed token over the credentials' revision rev, and
// records the new expiry on the connection. Channels attached with the old token keep it
// (docs/meta.md, "Refresh": the channels family has no credential update).
func (s *Service) storeRefreshed(ctx context.Context, account, id, token string, expiry time.Time, rev int64) error {
	sealed, err := s.sealer.Seal(ctx, []byte(token), credAAD(account, id))
	if err != nil {
		return fmt.Errorf("meta: seal token: %w", err)
	}
	now := stamp(s.now())
	it, err := item(credKey(account, id), rev+1, credRecord{Sealed: sealed, Expiry: expiry.UTC(), UpdatedAt: now})
	if err != nil {
		return err
	}
	// Stored even if the caller has gone: the new token is the one that works from now on.
	if err := s.store.Put(context.WithoutCancel(ctx), it, store.RevisionIs(rev)); err != nil {
		return err
	}
	_, err = s.update(context.WithoutCancel(ctx), account, id, func(r *record) bool {
		r.ExpiresAt, r.RefreshedAt = expiryPtr(expiry), &now
		return true
	})
	return err
}
