package emaildomains

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// JobRelease is the job kind that deregisters a deleted domain's name from the provider and
// then gives up its claim (ReleaseStep).
const JobRelease = "emaildomains.release"

// releaseDelay is how long a release waits before it deregisters: longer than any
// registration a verify began before the claim was marked releasing can take (a request's
// time), so that no identity registered for the name is left behind it.
const releaseDelay = 2 * time.Minute

// releasePayload names the claim a release job gives up.
type releasePayload struct {
	Name     string `json:"name"`
	BotID    string `json:"bot_id"`
	DomainID string `json:"domain_id"`
}

// Steps are the family's job kinds.
func (s *Service) Steps() map[string]jobs.Step {
	return map[string]jobs.Step{JobRelease: s.ReleaseStep}
}

// releaseWrites are the writes that give up the claim of rec's name, held by bot at revision
// rev, and deliver, to call once they have committed. Without a provider (the local
// process) the claim is deleted. With one, the provider's identity of the name must go
// first, and only while the claim is still held, or it could remove the identity of a bot
// that verified the name in between: so the claim is marked releasing (no verify takes it,
// no inbound mail is routed by it) and a job staged in the same transaction deregisters the
// name and then deletes the claim (ReleaseStep), retried by the queue until the provider
// confirms.
func (s *Service) releaseWrites(bot string, rec domainRecord, rev int64) ([]store.Write, func(context.Context), error) {
	if s.identities == nil {
		return []store.Write{store.DeleteOp(claimKey(rec.Name), store.RevisionIs(rev))}, func(context.Context) {}, nil
	}
	data, err := store.Encode(claim{BotID: bot, DomainID: rec.ID, Releasing: true})
	if err != nil {
		return nil, nil, err
	}
	m, err := jobs.StartMessage(releaseDelay, JobRelease, releasePayload{Name: rec.Name, BotID: bot, DomainID: rec.ID})
	if err != nil {
		return nil, nil, err
	}
	staged, deliver, err := s.outbox.Stage(m)
	if err != nil {
		return nil, nil, err
	}
	writes := append([]store.Write{store.PutOp(store.Item{Key: claimKey(rec.Name), Data: data, Revision: rev + 1}, store.RevisionIs(rev))}, staged...)
	return writes, deliver, nil
}

// ReleaseStep runs a release job: while the claim it names is still that domain's and
// marked releasing, it deregisters the name from the provider, then deletes the claim. A
// claim that is gone or changed (the bot's purge released it first) ends the job; a
// provider failure fails the step, which the queue retries.
func (s *Service) ReleaseStep(ctx context.Context, payload json.RawMessage, _ string) (string, bool, error) {
	var p releasePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", false, fmt.Errorf("emaildomains release: %w", err)
	}
	c, rev, ok, err := s.readClaim(ctx, p.Name)
	if err != nil {
		return "", false, err
	}
	if !ok || c != (claim{BotID: p.BotID, DomainID: p.DomainID, Releasing: true}) {
		return "", true, nil
	}
	if s.identities != nil {
		if err := s.identities.Deregister(ctx, p.Name); err != nil {
			return "", false, fmt.Errorf("deregister email domain %s (%s): %w", p.Name, p.DomainID, err)
		}
	}
	err = s.store.Delete(ctx, claimKey(p.Name), store.RevisionIs(rev))
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return "", false, err
	}
	return "", true, nil
}

// releaseClaim gives up the claim of rec's name when it is rec's and not being released
// already: the undo of claim by a verify whose domain was deleted meanwhile (a deletion that
// read the claim before the verify wrote it left it). Best effort: a claim left held is the
// bot's own, which its next verify of the name takes over, and its purge releases.
func (s *Service) releaseClaim(ctx context.Context, bot string, rec domainRecord) {
	ctx, cancel := background(ctx, 10*time.Second)
	defer cancel()
	c, rev, exists, err := s.readClaim(ctx, rec.Name)
	if err == nil && exists && c == (claim{BotID: bot, DomainID: rec.ID}) {
		var writes []store.Write
		var deliver func(context.Context)
		if writes, deliver, err = s.releaseWrites(bot, rec, rev); err == nil {
			if err = s.store.Transact(ctx, writes); err == nil {
				deliver(ctx)
			}
		}
	}
	if err != nil {
		s.log.ErrorContext(ctx, "email domain claim not released", "request_id", httpapi.RequestID(ctx),
			"bot_id", bot, "domain_id", rec.ID, "domain", rec.Name, "error", err)
	}
}

// errDomainReleasing is the 409 for a name whose claim is being given up.
func errDomainReleasing(name string) error {
	return httpapi.Errorf(httpapi.KindConflict, "domain_releasing",
		"%s was deleted and is being deregistered from the email provider; verify again in a few minutes", name).
		With("retry_after_seconds", int64(releaseDelay/time.Second)+60)
}
