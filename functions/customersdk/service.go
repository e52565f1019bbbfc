// Package customersdk keeps the customer SDK's data: each bot's SDK project (project key,
// app allowlists, identity secrets), the installations (devices) registered under it, their
// push tokens (web push subscriptions, APNs and FCM tokens) and receipt counters. It serves
// the management routes of the token API (spec 4.5); the device surface /sdk/v1/*
// (functions/sdk) and browser push (functions/webpush) reach it through the methods of
// Service, each behind an interface it declares itself.
package customersdk

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store"
)

// SecretGrace is how long the identity secret a rotation replaced stays valid (spec 8).
const SecretGrace = 24 * time.Hour

// Config is the service's dependencies. Store and Now are required; without Key or Sealer
// the SDK cannot be enabled (503 sdk_not_configured) and no project key verifies.
type Config struct {
	Store store.Store
	// Sealer seals the identity secrets and push credentials at rest.
	Sealer secrets.Sealer
	// Key signs project keys (family.Env.SDKKey): 32 bytes or more, or nil.
	Key []byte
	// Region is the deployment's region, shown on the project ("local" locally).
	Region string
	Now    func() time.Time
	Log    *slog.Logger
}

// Service is the customer SDK of every bot.
type Service struct {
	store  store.Store
	sealer secrets.Sealer
	key    []byte
	region string
	now    func() time.Time
	log    *slog.Logger
}

// NewService returns the service.
func NewService(c Config) *Service {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Region == "" {
		c.Region = "local"
	}
	return &Service{store: c.Store, sealer: c.Sealer, key: c.Key, region: c.Region, now: c.Now, log: c.Log}
}

// errNotConfigured is the 503 of a deployment without the project-key signing secret.
func errNotConfigured() error {
	return httpapi.E(httpapi.KindUnavailable, "sdk_not_configured",
		"the customer SDK is not configured on this deployment: it has no project-key signing secret")
}

func (s *Service) configured() bool { return len(s.key) >= 32 && s.sealer != nil }

// stamp is a resource timestamp: UTC, whole seconds.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// ProjectKeyFor is the bot's project key: "pk_" + the bot id + "." + a MAC of it under the
// SDK key, so that the key names its project and a forged one fails offline.
func (s *Service) ProjectKeyFor(bot string) string {
	return "pk_" + bot + "." + s.mac(bot)
}

func (s *Service) mac(bot string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("customer-sdk project key v1\x00" + bot))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// botOfKey returns the bot a project key names, "" for a forged or malformed key.
func (s *Service) botOfKey(key string) string {
	if !s.configured() || len(key) > 100 {
		return ""
	}
	rest, ok := strings.CutPrefix(key, "pk_")
	if !ok {
		return ""
	}
	bot, mac, ok := strings.Cut(rest, ".")
	if !ok || !ids.Valid("bot", bot) || !hmac.Equal([]byte(mac), []byte(s.mac(bot))) {
		return ""
	}
	return bot
}

func (s *Service) load(ctx context.Context, bot string) (record, error) {
	it, err := s.store.Get(ctx, projectKey(bot))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, httpapi.NotFound("customer SDK project")
	}
	if err != nil {
		return record{}, err
	}
	rec, err := store.Decode[record](it)
	rec.Revision = it.Revision
	return rec, err
}

func (s *Service) show(rec record) Project {
	p := rec.shown(s.now())
	if s.configured() {
		p.ProjectKey = s.ProjectKeyFor(p.BotID)
	}
	p.Region = s.region
	return p
}

func (s *Service) put(ctx context.Context, rec record, cond store.Condition) error {
	b, err := store.Encode(rec)
	if err != nil {
		return err
	}
	return s.store.Put(ctx, store.Item{Key: projectKey(rec.BotID), Revision: rec.Revision, Data: b}, cond)
}

// Project returns the bot's project (404 when the SDK was never enabled).
func (s *Service) Project(ctx context.Context, bot string) (Project, error) {
	rec, err := s.load(ctx, bot)
	if err != nil {
		return Project{}, err
	}
	return s.show(rec), nil
}

// ProjectByKey returns the project a device's project key names. A key that is forged,
// malformed or of a deployment without the SDK key is refused before any read (401
// invalid_project_key); so is the key of a bot without a project.
func (s *Service) ProjectByKey(ctx context.Context, key string) (Project, error) {
	bot := s.botOfKey(key)
	if bot == "" {
		return Project{}, errProjectKey()
	}
	p, err := s.Project(ctx, bot)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return Project{}, errProjectKey()
	}
	return p, err
}

// BotOfProjectKey returns the bot a project key names, checked by its signature only (no
// read): 401 invalid_project_key for a forged, malformed or foreign key. Whether the project
// still exists is ProjectByKey's to say.
func (s *Service) BotOfProjectKey(key string) (string, error) {
	if bot := s.botOfKey(key); bot != "" {
		return bot, nil
	}
	return "", errProjectKey()
}

func errProjectKey() error {
	return httpapi.E(httpapi.KindUnauthenticated, "invalid_project_key", "the project key is not a project's of this deployment")
}

// newSecret mints an identity secret: "mbs_" and 32 random bytes, base64url. Devices'
// backends compute HMAC-SHA256 keyed with this string.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "mbs_" + base64.RawURLEncoding.EncodeToString(b)
}

func secretAAD(bot string, version int) []byte {
	return fmt.Appendf(nil, "%s/customer-sdk/identity-secret/%d", bot, version)
}

// Enable creates the bot's project on the first call, returning its identity secret (the
// only time it is shown) and created true; later calls apply settings (allowlists) and
// enable a disabled project, returning no secret. Without the SDK key: 503.
func (s *Service) Enable(ctx context.Context, bot string, set Settings) (Project, string, bool, error) {
	if !s.configured() {
		return Project{}, "", false, errNotConfigured()
	}
	for range 3 {
		rec, err := s.load(ctx, bot)
		switch {
		case httpapi.KindOf(err) == httpapi.KindNotFound:
			secret := newSecret()
			now := stamp(s.now())
			rec = record{Project: Project{BotID: bot, Enabled: true, IdentitySecretVersion: 1, Revision: 1, CreatedAt: now, UpdatedAt: now}}
			apply(&rec.Project, set)
			if rec.Sealed, err = s.sealer.Seal(ctx, []byte(secret), secretAAD(bot, 1)); err != nil {
				return Project{}, "", false, fmt.Errorf("seal the identity secret: %w", err)
			}
			err = s.put(ctx, rec, store.MustNotExist)
			if errors.Is(err, store.ErrConditionFailed) {
				continue // enabled concurrently: this call is the settings update
			}
			if err != nil {
				return Project{}, "", false, err
			}
			return s.show(rec), secret, true, nil
		case err != nil:
			return Project{}, "", false, err
		}
		before := rec.Project
		set.Enabled = ptr(true)
		apply(&rec.Project, set)
		if sameSettings(before, rec.Project) {
			return s.show(rec), "", false, nil // idempotent: nothing written
		}
		rec.Revision++
		rec.UpdatedAt = stamp(s.now())
		err = s.put(ctx, rec, store.RevisionIs(rec.Revision-1))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return Project{}, "", false, err
		}
		return s.show(rec), "", false, nil
	}
	return Project{}, "", false, httpapi.E(httpapi.KindConflict, "concurrent_update", "the project changed while being enabled; retry")
}

func ptr[T any](v T) *T { return &v }

func apply(p *Project, set Settings) {
	if set.WebOrigins != nil {
		p.WebOrigins = *set.WebOrigins
	}
	if set.IOSBundleIDs != nil {
		p.IOSBundleIDs = *set.IOSBundleIDs
	}
	if set.AndroidPackages != nil {
		p.AndroidPackages = *set.AndroidPackages
	}
	if set.Enabled != nil {
		p.Enabled = *set.Enabled
	}
}

func sameSettings(a, b Project) bool {
	eq := func(x, y []string) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return a.Enabled == b.Enabled && eq(a.WebOrigins, b.WebOrigins) && eq(a.IOSBundleIDs, b.IOSBundleIDs) && eq(a.AndroidPackages, b.AndroidPackages)
}

// Update applies settings (PATCH) at the expected revision.
func (s *Service) Update(ctx context.Context, bot string, rev int64, set Settings) (Project, error) {
	rec, err := s.load(ctx, bot)
	if err != nil {
		return Project{}, err
	}
	if rec.Revision != rev {
		return Project{}, httpapi.StaleRevision(rec.Revision)
	}
	apply(&rec.Project, set)
	rec.Revision++
	rec.UpdatedAt = stamp(s.now())
	if err := s.put(ctx, rec, store.RevisionIs(rev)); errors.Is(err, store.ErrConditionFailed) {
		return Project{}, s.stale(ctx, bot)
	} else if err != nil {
		return Project{}, err
	}
	return s.show(rec), nil
}

func (s *Service) stale(ctx context.Context, bot string) error {
	rec, err := s.load(ctx, bot)
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(rec.Revision)
}

// RotateSecret replaces the identity secret with a new one, returned once. The replaced
// secret stays valid for SecretGrace; one rotated out before (two rotations within a day)
// stops at once. rev, when given, must be the current revision.
func (s *Service) RotateSecret(ctx context.Context, bot string, rev *int64) (Project, string, error) {
	if !s.configured() {
		return Project{}, "", errNotConfigured()
	}
	rec, err := s.load(ctx, bot)
	if err != nil {
		return Project{}, "", err
	}
	if rev != nil && rec.Revision != *rev {
		return Project{}, "", httpapi.StaleRevision(rec.Revision)
	}
	secret := newSecret()
	now := s.now()
	v := rec.IdentitySecretVersion + 1
	sealed, err := s.sealer.Seal(ctx, []byte(secret), secretAAD(bot, v))
	if err != nil {
		return Project{}, "", fmt.Errorf("seal the identity secret: %w", err)
	}
	lapses := stamp(now.Add(SecretGrace))
	rec.PreviousSealed, rec.Sealed = rec.Sealed, sealed
	rec.IdentitySecretVersion = v
	rec.PreviousSecretLapsesAt = &lapses
	rec.Revision++
	rec.UpdatedAt = stamp(now)
	if err := s.put(ctx, rec, store.RevisionIs(rec.Revision-1)); errors.Is(err, store.ErrConditionFailed) {
		return Project{}, "", s.stale(ctx, bot)
	} else if err != nil {
		return Project{}, "", err
	}
	return s.show(rec), secret, nil
}

// secretFor opens the identity secret of epoch (a version) if it is still accepted: the
// current one, or the previous one until it lapses.
func (s *Service) secretFor(ctx context.Context, rec record, epoch int) ([]byte, bool, error) {
	var sealed []byte
	switch {
	case epoch == rec.IdentitySecretVersion:
		sealed = rec.Sealed
	case epoch == rec.IdentitySecretVersion-1 && rec.PreviousSealed != nil && rec.PreviousSecretLapsesAt != nil && s.now().Before(*rec.PreviousSecretLapsesAt):
		sealed = rec.PreviousSealed
	default:
		return nil, false, nil
	}
	b, err := s.sealer.Open(ctx, sealed, secretAAD(rec.BotID, epoch))
	if err != nil {
		return nil, false, fmt.Errorf("open the identity secret: %w", err)
	}
	return b, true, nil
}

// epochValid reports whether an identity made under epoch is still accepted.
func (s *Service) epochValid(rec record, epoch int) bool {
	return epoch == rec.IdentitySecretVersion ||
		epoch == rec.IdentitySecretVersion-1 && rec.PreviousSealed != nil && rec.PreviousSecretLapsesAt != nil && s.now().Before(*rec.PreviousSecretLapsesAt)
}
