package webpush

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // Lambda's provided.al2023 image has no zoneinfo; IANA names must still resolve

	"github.com/SherClockHolmes/webpush-go"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Limits of the configuration.
const (
	MaxSubjectLen        = 256
	MaxNavigationOrigins = 20
)

// Settings is a bot's browser push configuration as the API shows it: never the private key.
type Settings struct {
	Enabled bool `json:"enabled"`
	// VAPIDPublicKey is the uncompressed P-256 public key (base64url, no padding) browsers
	// subscribe with (PushManager.subscribe's applicationServerKey).
	VAPIDPublicKey string `json:"vapid_public_key"`
	// Subject is the VAPID contact push services reach the sender at: mailto: or https:.
	Subject string `json:"subject"`
	// NavigationOrigins are the only origins a notification (its URL and its actions'
	// URLs) may open; empty allows none, so a document with a URL cannot be sent.
	NavigationOrigins []string   `json:"navigation_origins"`
	QuietHours        QuietHours `json:"quiet_hours"`
	// KeyVersion counts the key pairs: 1 after enable, one more per rotation.
	KeyVersion    int       `json:"key_version"`
	KeysCreatedAt time.Time `json:"keys_created_at"`
	Revision      int64     `json:"revision"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// QuietHours is the daily window in which no message is sent, in Timezone: Start to End
// ("HH:MM", 24-hour clock; a window that crosses midnight has End before Start).
type QuietHours struct {
	Enabled  bool   `json:"enabled"`
	Start    string `json:"start"`
	End      string `json:"end"`
	Timezone string `json:"timezone"`
}

// defaultQuietHours are a new configuration's: off, 22:00 to 08:00 UTC when switched on.
var defaultQuietHours = QuietHours{Enabled: false, Start: "22:00", End: "08:00", Timezone: "UTC"}

// record is the stored configuration: the Settings and the sealed private key.
type record struct {
	Settings
	// SealedPrivateKey is the VAPID private key (base64url), sealed under aad(bot,
	// KeyVersion).
	SealedPrivateKey []byte `json:"sealed_private_key"`
}

func (r record) item(bot string) (store.Item, error) {
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: configKey(bot), Revision: r.Revision, Data: b}, nil
}

// Enable is the body of POST .../web-push/enable: the members it gives are set, the others
// kept (defaults on the first call).
type Enable struct {
	Subject           *string     `json:"subject"`
	NavigationOrigins *[]string   `json:"navigation_origins"`
	QuietHours        *QuietHours `json:"quiet_hours"`
}

// Change is the body of PATCH .../web-push.
type Change struct {
	ExpectedRevision  *int64      `json:"expected_revision"`
	Subject           *string     `json:"subject"`
	NavigationOrigins *[]string   `json:"navigation_origins"`
	QuietHours        *QuietHours `json:"quiet_hours"`
	Enabled           *bool       `json:"enabled"`
}

// Validate checks what decoding cannot.
func (c *Change) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(c.ExpectedRevision)
	checkFields(&p, c.Subject, c.NavigationOrigins, c.QuietHours)
	return p.Err()
}

// Validate checks what decoding cannot.
func (e *Enable) Validate() error {
	var p httpapi.Problems
	checkFields(&p, e.Subject, e.NavigationOrigins, e.QuietHours)
	return p.Err()
}

// checkFields adds the problems of the settable members and puts them in canonical form.
func checkFields(p *httpapi.Problems, subject *string, origins *[]string, quiet *QuietHours) {
	if subject != nil {
		*subject = strings.TrimSpace(*subject)
		if msg := checkSubject(*subject); msg != "" {
			p.Add("subject", "%s", msg)
		}
	}
	if origins != nil {
		if len(*origins) > MaxNavigationOrigins {
			p.Add("navigation_origins", "at most %d origins", MaxNavigationOrigins)
		}
		out := make([]string, 0, len(*origins))
		for i, o := range *origins {
			canon, msg := checkOrigin(o)
			if msg != "" {
				p.Add(fmt.Sprintf("navigation_origins[%d]", i), "%s", msg)
				continue
			}
			if !slices.Contains(out, canon) {
				out = append(out, canon)
			}
		}
		*origins = out
	}
	if quiet != nil {
		if quiet.Timezone == "" {
			quiet.Timezone = "UTC"
		}
		for _, f := range []struct{ name, v string }{{"start", quiet.Start}, {"end", quiet.End}} {
			if _, ok := clockMinutes(f.v); !ok {
				p.Add("quiet_hours."+f.name, `must be a time of day "HH:MM" (00:00 to 23:59)`)
			}
		}
		if quiet.Start == quiet.End && quiet.Enabled {
			p.Add("quiet_hours.end", "must differ from start")
		}
		if _, err := time.LoadLocation(quiet.Timezone); err != nil || quiet.Timezone == "Local" {
			p.Add("quiet_hours.timezone", "must be an IANA time zone name such as Europe/Berlin")
		}
	}
}

// checkSubject returns why s is not a VAPID subject (RFC 8292 section 2.1), "" when it is.
func checkSubject(s string) string {
	switch {
	case s == "":
		return "is required: a mailto: address or an https: URL push services can reach you at"
	case len(s) > MaxSubjectLen:
		return fmt.Sprintf("at most %d characters", MaxSubjectLen)
	case strings.HasPrefix(s, "mailto:"):
		a, err := mail.ParseAddress(strings.TrimPrefix(s, "mailto:"))
		if err != nil || a.Name != "" || strings.ContainsAny(a.Address, " <>") {
			return "must be mailto: followed by one email address, such as mailto:push@example.com"
		}
		return ""
	case strings.HasPrefix(s, "https://"):
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.User != nil {
			return "must be an https URL with a host"
		}
		return ""
	default:
		return "must start with mailto: or https:// (RFC 8292)"
	}
}

// checkOrigin returns o as an origin (scheme://host[:port], lower case) or why it is not
// one. Plain http is allowed for localhost only (a site in development).
func checkOrigin(o string) (string, string) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", "must be an origin: scheme and host, such as https://shop.example"
	}
	host := strings.ToLower(u.Hostname())
	switch u.Scheme {
	case "https":
	case "http":
		if host != "localhost" && host != "127.0.0.1" && host != "::1" {
			return "", "must use https (http only for localhost)"
		}
	default:
		return "", "must use https"
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), ""
}

// clockMinutes parses "HH:MM" as minutes after midnight.
func clockMinutes(s string) (int, bool) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, false
	}
	return t.Hour()*60 + t.Minute(), true
}

// quietUntil reports whether now falls in q, and when the window ends.
func quietUntil(q QuietHours, now time.Time) (time.Time, bool) {
	if !q.Enabled {
		return time.Time{}, false
	}
	loc, err := time.LoadLocation(q.Timezone)
	if err != nil {
		loc = time.UTC
	}
	start, ok1 := clockMinutes(q.Start)
	end, ok2 := clockMinutes(q.End)
	if !ok1 || !ok2 || start == end {
		return time.Time{}, false
	}
	local := now.In(loc)
	m := local.Hour()*60 + local.Minute()
	in := start <= m && m < end
	if start > end {
		in = m >= start || m < end
	}
	if !in {
		return time.Time{}, false
	}
	ends := time.Date(local.Year(), local.Month(), local.Day(), end/60, end%60, 0, 0, loc)
	if !ends.After(local) {
		ends = time.Date(local.Year(), local.Month(), local.Day()+1, end/60, end%60, 0, 0, loc)
	}
	return ends.UTC(), true
}

// errNotEnabled answers for a bot whose browser push was never enabled.
var errNotEnabled = httpapi.E(httpapi.KindNotFound, "web_push_not_enabled",
	"browser push is not enabled for this bot: POST /api/bots/{botID}/web-push/enable first")

// load reads the stored configuration; errNotEnabled when there is none.
func (s *Service) load(ctx context.Context, bot string) (record, error) {
	it, err := s.store.Get(ctx, configKey(bot))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, errNotEnabled
	}
	if err != nil {
		return record{}, err
	}
	return store.Decode[record](it)
}

// Get returns the bot's configuration.
func (s *Service) Get(ctx context.Context, bot string) (Settings, error) {
	r, err := s.load(ctx, bot)
	return r.Settings, err
}

// PublicKey returns the VAPID public key devices subscribe with and whether push is enabled;
// "" and false when it was never enabled (no error: the device surface shows it as off).
func (s *Service) PublicKey(ctx context.Context, bot string) (string, bool, error) {
	r, err := s.load(ctx, bot)
	if errors.Is(err, errNotEnabled) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return r.VAPIDPublicKey, r.Enabled, nil
}

func generateKeys() (string, string, error) { return webpush.GenerateVAPIDKeys() }

// newKeys makes a key pair and seals its private half for version.
func (s *Service) newKeys(ctx context.Context, bot string, version int) (public string, sealed []byte, err error) {
	priv, pub, err := s.genKeys()
	if err != nil {
		return "", nil, fmt.Errorf("generate VAPID keys: %w", err)
	}
	sealed, err = s.sealer.Seal(ctx, []byte(priv), aad(bot, version))
	if err != nil {
		return "", nil, fmt.Errorf("seal VAPID key: %w", err)
	}
	return pub, sealed, nil
}

// Enable turns browser push on for bot: the first call makes the key pair (and needs a
// subject); later calls apply e and keep the keys. created reports the first call. A call
// that changes nothing makes no new revision.
func (s *Service) Enable(ctx context.Context, bot string, e Enable) (Settings, bool, error) {
	for range updateAttempts {
		r, err := s.load(ctx, bot)
		switch {
		case errors.Is(err, errNotEnabled):
			if e.Subject == nil {
				var p httpapi.Problems
				p.Add("subject", "is required on the first enable: a mailto: address or an https: URL push services can reach you at")
				return Settings{}, false, p.Err()
			}
			now := stamp(s.now())
			pub, sealed, err := s.newKeys(ctx, bot, 1)
			if err != nil {
				return Settings{}, false, err
			}
			r = record{Settings: Settings{Enabled: true, VAPIDPublicKey: pub, NavigationOrigins: []string{}, QuietHours: defaultQuietHours,
				KeyVersion: 1, KeysCreatedAt: now, Revision: 1, CreatedAt: now, UpdatedAt: now}, SealedPrivateKey: sealed}
			apply(&r.Settings, e.Subject, e.NavigationOrigins, e.QuietHours, nil)
			it, err := r.item(bot)
			if err != nil {
				return Settings{}, false, err
			}
			err = s.store.Put(ctx, it, store.MustNotExist)
			if errors.Is(err, store.ErrConditionFailed) {
				continue // enabled concurrently: this call is then a settings update
			}
			if err != nil {
				return Settings{}, false, err
			}
			return r.Settings, true, nil
		case err != nil:
			return Settings{}, false, err
		}
		on := true
		next, err := s.save(ctx, bot, r, func(st *Settings) { apply(st, e.Subject, e.NavigationOrigins, e.QuietHours, &on) })
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		return next, false, err
	}
	return Settings{}, false, httpapi.E(httpapi.KindConflict, "concurrent_update", "the configuration changed concurrently too often; retry")
}

// Update applies c at the revision it expects.
func (s *Service) Update(ctx context.Context, bot string, c Change) (Settings, error) {
	r, err := s.load(ctx, bot)
	if err != nil {
		return Settings{}, err
	}
	if r.Revision != *c.ExpectedRevision {
		return Settings{}, httpapi.StaleRevision(r.Revision)
	}
	next, err := s.save(ctx, bot, r, func(st *Settings) { apply(st, c.Subject, c.NavigationOrigins, c.QuietHours, c.Enabled) })
	if errors.Is(err, store.ErrConditionFailed) {
		cur, lerr := s.load(ctx, bot)
		if lerr != nil {
			return Settings{}, lerr
		}
		return Settings{}, httpapi.StaleRevision(cur.Revision)
	}
	return next, err
}

// save writes r changed by change at r's revision plus one; when change changes nothing it
// writes nothing.
func (s *Service) save(ctx context.Context, bot string, r record, change func(*Settings)) (Settings, error) {
	before := r.Settings
	before.NavigationOrigins = slices.Clone(r.NavigationOrigins)
	change(&r.Settings)
	if sameSettings(before, r.Settings) {
		return before, nil
	}
	r.Revision++
	r.UpdatedAt = stamp(s.now())
	it, err := r.item(bot)
	if err != nil {
		return Settings{}, err
	}
	if err := s.store.Put(ctx, it, store.RevisionIs(before.Revision)); err != nil {
		return Settings{}, err
	}
	return r.Settings, nil
}

func sameSettings(a, b Settings) bool {
	return a.Enabled == b.Enabled && a.Subject == b.Subject && slices.Equal(a.NavigationOrigins, b.NavigationOrigins) &&
		a.QuietHours == b.QuietHours && a.VAPIDPublicKey == b.VAPIDPublicKey
}

func apply(st *Settings, subject *string, origins *[]string, quiet *QuietHours, enabled *bool) {
	if subject != nil {
		st.Subject = *subject
	}
	if origins != nil {
		st.NavigationOrigins = slices.Clone(*origins)
	}
	if quiet != nil {
		st.QuietHours = *quiet
	}
	if enabled != nil {
		st.Enabled = *enabled
	}
}

// Rotation is the answer of a confirmed key rotation.
type Rotation struct {
	Settings
	// ExpiredSubscriptions is how many subscriptions the rotation expired: they were made
	// with the old public key and cannot receive messages signed with the new one.
	ExpiredSubscriptions int64 `json:"expired_subscriptions"`
}

// RotateKeys replaces the key pair. Unless confirm, it changes nothing and answers 409
// confirm_required with the count of active subscriptions (which the rotation expires). A
// confirmed rotation writes the new keys first, then expires every subscription: a crash
// between the two leaves subscriptions that the push service refuses (their key is the old
// one) and a retried rotation expires.
func (s *Service) RotateKeys(ctx context.Context, bot string, confirm bool, expected *int64) (Rotation, error) {
	r, err := s.load(ctx, bot)
	if err != nil {
		return Rotation{}, err
	}
	if expected != nil && *expected != r.Revision {
		return Rotation{}, httpapi.StaleRevision(r.Revision)
	}
	if !confirm {
		n, err := s.subs.Active(ctx, bot)
		if err != nil {
			return Rotation{}, fmt.Errorf("count active subscriptions: %w", err)
		}
		return Rotation{}, httpapi.Errorf(httpapi.KindConflict, "confirm_required",
			"rotating the keys expires every subscription (%d active): send confirm: true to rotate", n).With("active_subscriptions", n)
	}
	pub, sealed, err := s.newKeys(ctx, bot, r.KeyVersion+1)
	if err != nil {
		return Rotation{}, err
	}
	prev := r.Revision
	now := stamp(s.now())
	r.VAPIDPublicKey, r.SealedPrivateKey = pub, sealed
	r.KeyVersion++
	r.KeysCreatedAt, r.UpdatedAt = now, now
	r.Revision++
	it, err := r.item(bot)
	if err != nil {
		return Rotation{}, err
	}
	if err := s.store.Put(ctx, it, store.RevisionIs(prev)); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			cur, lerr := s.load(ctx, bot)
			if lerr != nil {
				return Rotation{}, lerr
			}
			return Rotation{}, httpapi.StaleRevision(cur.Revision)
		}
		return Rotation{}, err
	}
	n, err := s.subs.ExpireAll(ctx, bot)
	if err != nil {
		return Rotation{}, fmt.Errorf("expire the subscriptions of the old keys (the keys were rotated; rotate again to expire them): %w", err)
	}
	return Rotation{Settings: r.Settings, ExpiredSubscriptions: n}, nil
}

// privateKey opens the configuration's private key.
func (s *Service) privateKey(ctx context.Context, bot string, r record) (string, error) {
	b, err := s.sealer.Open(ctx, r.SealedPrivateKey, aad(bot, r.KeyVersion))
	if err != nil {
		return "", fmt.Errorf("open VAPID key: %w", err)
	}
	return string(b), nil
}
