package customersdk

import (
	"context"
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/pushendpoint"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Platform is the kind of app an installation runs in.
type Platform string

// The platforms.
const (
	PlatformWeb     Platform = "web"
	PlatformIOS     Platform = "ios"
	PlatformAndroid Platform = "android"
)

// Installation is one device (a browser profile on a site, an app on a phone) registered
// with a project.
type Installation struct {
	ID       string   `json:"id"`
	BotID    string   `json:"bot_id"`
	Platform Platform `json:"platform"`
	// AppID is the web origin, iOS bundle id or Android package the device registered as.
	AppID string `json:"app_id"`
	// UserID is the customer's user id the device proved (identify), null while anonymous
	// or once the identity's secret has lapsed.
	UserID *string `json:"user_id"`
	// IdentityEpoch is the identity secret version UserID was proved under.
	IdentityEpoch *int       `json:"identity_epoch"`
	IdentifiedAt  *time.Time `json:"identified_at"`
	SDKVersion    string     `json:"sdk_version"`
	Locale        string     `json:"locale"`
	Timezone      string     `json:"timezone"`
	BrowserFamily string     `json:"browser_family"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// instRecord is the stored installation.
type instRecord struct {
	Installation
	TokenHash string `json:"token_hash"`
}

// tokenRecord is the token lookup item.
type tokenRecord struct {
	BotID          string `json:"bot_id"`
	InstallationID string `json:"installation_id"`
}

// InstallationRequest is what a device registers with.
type InstallationRequest struct {
	Platform Platform
	AppID    string
	// Origin is the request's Origin header ("" when none: an app, not a browser).
	Origin     string
	SDKVersion string
	Locale     string
	Timezone   string
	// UserAgent is the request's User-Agent header (the browser family is kept, not it).
	UserAgent string
}

// MaxInstallationsListed is the most installations the list shows (spec 8).
const MaxInstallationsListed = 200

var (
	sdkVersionRe = regexp.MustCompile(`^[A-Za-z0-9._+-]{1,32}$`)
	localeRe     = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}$`)
	timezoneRe   = regexp.MustCompile(`^[A-Za-z0-9_+/-]{1,64}$`)
	messageIDRe  = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
)

func errDisabled() error {
	return httpapi.E(httpapi.KindForbidden, "sdk_disabled", "the customer SDK project is disabled")
}

func errOriginNotAllowed() error {
	return httpapi.E(httpapi.KindForbidden, "origin_not_allowed", "this origin or app is not in the project's allowlist")
}

// ErrInstallationToken is the 401 of a missing, malformed, unknown or revoked installation
// token (and of any other kind of token).
func ErrInstallationToken() error {
	return httpapi.E(httpapi.KindUnauthenticated, "invalid_token", "send an installation token (mbi_...) as Authorization: Bearer; this one is unknown, revoked or not an installation token")
}

// CheckApp checks a device's platform, app id and Origin header against the project: a
// browser (any request with an Origin) must be a web installation whose app id is its
// origin, allowlisted; an app's id must be in its platform's allowlist.
func CheckApp(p Project, platform Platform, appID, origin string) (string, error) {
	var p2 httpapi.Problems
	switch platform {
	case PlatformWeb, PlatformIOS, PlatformAndroid:
	case "":
		p2.Add("platform", "is required: web, ios or android")
	default:
		p2.Add("platform", "must be web, ios or android")
	}
	p2.Require("app_id", appID)
	if err := p2.Err(); err != nil {
		return "", err
	}
	if origin != "" && platform != PlatformWeb {
		return "", errOriginNotAllowed() // a browser claiming to be an app
	}
	switch platform {
	case PlatformWeb:
		app, err := CanonicalOrigin(appID)
		if err != nil {
			return "", httpapi.Errorf(httpapi.KindInvalid, "validation_failed", "app_id: %v", err).
				With("errors", []httpapi.FieldError{{Field: "app_id", Message: err.Error()}})
		}
		o, err := CanonicalOrigin(origin)
		if err != nil || o != app || !slices.Contains(p.WebOrigins, app) {
			return "", errOriginNotAllowed()
		}
		return app, nil
	case PlatformIOS:
		if !slices.Contains(p.IOSBundleIDs, appID) {
			return "", errOriginNotAllowed()
		}
	case PlatformAndroid:
		if !slices.Contains(p.AndroidPackages, appID) {
			return "", errOriginNotAllowed()
		}
	}
	return appID, nil
}

func browserFamily(ua string) string {
	switch {
	case ua == "":
		return ""
	case strings.Contains(ua, "Edg/"):
		return "edge"
	case strings.Contains(ua, "OPR/") || strings.Contains(ua, "Opera"):
		return "opera"
	case strings.Contains(ua, "Firefox/"):
		return "firefox"
	case strings.Contains(ua, "Chrome/") || strings.Contains(ua, "Chromium/"):
		return "chrome"
	case strings.Contains(ua, "Safari/"):
		return "safari"
	}
	return "other"
}

// RegisterInstallation registers a device with p and returns it with its installation
// token (mbi_...), which is shown this once and stored only as a hash.
func (s *Service) RegisterInstallation(ctx context.Context, p Project, in InstallationRequest) (Installation, string, error) {
	if !p.Enabled {
		return Installation{}, "", errDisabled()
	}
	var pr httpapi.Problems
	if in.SDKVersion != "" && !sdkVersionRe.MatchString(in.SDKVersion) {
		pr.Add("sdk_version", "must be 1 to 32 characters A-Z a-z 0-9 . _ + -")
	}
	if in.Locale != "" && (len(in.Locale) > 35 || !localeRe.MatchString(in.Locale)) {
		pr.Add("locale", "must be a BCP 47 language tag such as en-US")
	}
	if in.Timezone != "" && !timezoneRe.MatchString(in.Timezone) {
		pr.Add("timezone", "must be an IANA time zone such as Europe/Berlin")
	}
	if err := pr.Err(); err != nil {
		return Installation{}, "", err
	}
	app, err := CheckApp(p, in.Platform, in.AppID, in.Origin)
	if err != nil {
		return Installation{}, "", err
	}
	now := s.now()
	tok := auth.NewToken(auth.KindInstallation)
	inst := Installation{ID: ids.At("inst", now), BotID: p.BotID, Platform: in.Platform, AppID: app, SDKVersion: in.SDKVersion,
		Locale: in.Locale, Timezone: in.Timezone, BrowserFamily: browserFamily(in.UserAgent), CreatedAt: stamp(now), UpdatedAt: stamp(now)}
	rec := instRecord{Installation: inst, TokenHash: auth.HashToken(tok)}
	b, err := store.Encode(rec)
	if err != nil {
		return Installation{}, "", err
	}
	tb, err := store.Encode(tokenRecord{BotID: p.BotID, InstallationID: inst.ID})
	if err != nil {
		return Installation{}, "", err
	}
	err = s.store.Transact(ctx, []store.Write{
		store.PutOp(store.Item{Key: instKey(p.BotID, inst.ID), Revision: 1, Data: b}, store.MustNotExist),
		store.PutOp(store.Item{Key: tokenKey(rec.TokenHash), GSI1: store.IndexKey{PK: tokensIndexPK(p.BotID), SK: inst.ID}, Data: tb}, store.MustNotExist),
		store.AddOp(countKey(p.BotID, countInstallations), 1, time.Time{}),
	})
	if err != nil {
		return Installation{}, "", fmt.Errorf("register installation: %w", err)
	}
	return inst, tok, nil
}

// AuthenticateInstallation resolves an installation token (401 when it is not one, is
// unknown or was revoked; 403 sdk_disabled when the project is disabled). An identity whose
// secret has lapsed is dropped from the answer: the device is anonymous until it identifies
// again.
func (s *Service) AuthenticateInstallation(ctx context.Context, token string) (Installation, error) {
	inst, _, err := s.Authenticate(ctx, token)
	return inst, err
}

// Authenticate is AuthenticateInstallation that also returns the installation's project.
func (s *Service) Authenticate(ctx context.Context, token string) (Installation, Project, error) {
	if kind, ok := auth.ParseToken(token); !ok || kind != auth.KindInstallation {
		return Installation{}, Project{}, ErrInstallationToken()
	}
	hash := auth.HashToken(token)
	it, err := s.store.Get(ctx, tokenKey(hash))
	if errors.Is(err, store.ErrNotFound) {
		return Installation{}, Project{}, ErrInstallationToken()
	}
	if err != nil {
		return Installation{}, Project{}, err
	}
	tr, err := store.Decode[tokenRecord](it)
	if err != nil {
		return Installation{}, Project{}, err
	}
	ir, err := s.loadInst(ctx, tr.BotID, tr.InstallationID)
	if httpapi.KindOf(err) == httpapi.KindNotFound || (err == nil && !hmac.Equal([]byte(ir.TokenHash), []byte(hash))) {
		return Installation{}, Project{}, ErrInstallationToken()
	}
	if err != nil {
		return Installation{}, Project{}, err
	}
	rec, err := s.load(ctx, tr.BotID)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return Installation{}, Project{}, ErrInstallationToken()
	}
	if err != nil {
		return Installation{}, Project{}, err
	}
	if !rec.Enabled {
		return Installation{}, Project{}, errDisabled()
	}
	inst := ir.Installation
	if inst.IdentityEpoch != nil && !s.epochValid(rec, *inst.IdentityEpoch) {
		inst.UserID, inst.IdentityEpoch, inst.IdentifiedAt = nil, nil, nil
	}
	return inst, s.show(rec), nil
}

func (s *Service) loadInst(ctx context.Context, bot, id string) (instRecord, error) {
	if !ids.Valid("inst", id) {
		return instRecord{}, httpapi.NotFound("installation")
	}
	it, err := s.store.Get(ctx, instKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return instRecord{}, httpapi.NotFound("installation")
	}
	if err != nil {
		return instRecord{}, err
	}
	return store.Decode[instRecord](it)
}

// MaxUserIDLength bounds a user id.
const MaxUserIDLength = 256

// UserHash is the hash a customer's backend gives its app for a user: lower-case hex of
// HMAC-SHA256 of the user id keyed with the identity secret.
func UserHash(secret, userID string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(userID))
	return hex.EncodeToString(m.Sum(nil))
}

func errIdentity() error {
	return httpapi.E(httpapi.KindUnauthenticated, "invalid_identity",
		"user_hash does not match user_id under the identity secret of identity_epoch, or that secret is no longer accepted")
}

// Identify binds the installation to userID when hmacHex is the user's hash under the
// identity secret of epoch (the current secret, or the previous one until it lapses).
func (s *Service) Identify(ctx context.Context, inst Installation, userID string, hmacHex string, epoch int) (Installation, error) {
	var pr httpapi.Problems
	if userID == "" || len(userID) > MaxUserIDLength {
		pr.Add("user_id", "must be 1 to %d bytes", MaxUserIDLength)
	} else {
		pr.Text("user_id", userID, text.Line)
	}
	if len(hmacHex) != 64 {
		pr.Add("user_hash", "must be 64 hexadecimal characters (HMAC-SHA256)")
	}
	if epoch < 1 {
		pr.Add("identity_epoch", "must be the identity secret version, 1 or more")
	}
	if err := pr.Err(); err != nil {
		return Installation{}, err
	}
	got, err := hex.DecodeString(strings.ToLower(hmacHex))
	if err != nil {
		return Installation{}, errIdentity()
	}
	rec, err := s.load(ctx, inst.BotID)
	if err != nil {
		return Installation{}, err
	}
	secret, ok, err := s.secretFor(ctx, rec, epoch)
	if err != nil {
		return Installation{}, err
	}
	if !ok {
		return Installation{}, errIdentity()
	}
	want, _ := hex.DecodeString(UserHash(string(secret), userID))
	if !hmac.Equal(got, want) {
		return Installation{}, errIdentity()
	}
	it, err := s.store.Get(ctx, instKey(inst.BotID, inst.ID))
	if errors.Is(err, store.ErrNotFound) {
		return Installation{}, ErrInstallationToken() // revoked meanwhile
	}
	if err != nil {
		return Installation{}, err
	}
	ir, err := store.Decode[instRecord](it)
	if err != nil {
		return Installation{}, err
	}
	now := stamp(s.now())
	ir.UserID, ir.IdentityEpoch, ir.IdentifiedAt, ir.UpdatedAt = &userID, &epoch, &now, now
	b, err := store.Encode(ir)
	if err != nil {
		return Installation{}, err
	}
	it.Data, it.Revision = b, it.Revision+1
	if err := s.store.Put(ctx, it, store.RevisionIs(it.Revision-1)); errors.Is(err, store.ErrConditionFailed) {
		return Installation{}, httpapi.E(httpapi.KindConflict, "concurrent_update", "the installation changed meanwhile; retry")
	} else if err != nil {
		return Installation{}, err
	}
	return ir.Installation, nil
}

// Installations lists the bot's most recent installations, newest first: at most limit,
// never more than MaxInstallationsListed.
func (s *Service) Installations(ctx context.Context, bot string, limit int) ([]Installation, error) {
	if limit <= 0 || limit > MaxInstallationsListed {
		limit = MaxInstallationsListed
	}
	page, err := s.store.Query(ctx, store.Query{PK: sdkPK(bot), Prefix: instPrefix, Reverse: true, Limit: limit})
	if err != nil {
		return nil, err
	}
	rec, err := s.load(ctx, bot)
	if err != nil && httpapi.KindOf(err) != httpapi.KindNotFound {
		return nil, err
	}
	out := make([]Installation, 0, len(page.Items))
	for _, it := range page.Items {
		ir, err := store.Decode[instRecord](it)
		if err != nil {
			return nil, err
		}
		inst := ir.Installation
		if inst.IdentityEpoch != nil && !s.epochValid(rec, *inst.IdentityEpoch) {
			inst.UserID, inst.IdentityEpoch, inst.IdentifiedAt = nil, nil, nil
		}
		out = append(out, inst)
	}
	return out, nil
}

// RevokeInstallation deletes an installation, its token and its push tokens in one
// transaction: the device's next call is refused.
func (s *Service) RevokeInstallation(ctx context.Context, bot, id string) error {
	ir, err := s.loadInst(ctx, bot, id)
	if err != nil {
		return err
	}
	writes := []store.Write{
		store.DeleteOp(instKey(bot, id), store.MustExist),
		store.DeleteOp(tokenKey(ir.TokenHash), store.Always),
		store.AddOp(countKey(bot, countInstallations), -1, time.Time{}),
	}
	for _, kind := range []PushKind{PushWeb, PushAPNs, PushFCM} {
		pt, err := s.loadPush(ctx, bot, pushID(kind, id))
		if httpapi.KindOf(err) == httpapi.KindNotFound {
			continue
		}
		if err != nil {
			return err
		}
		writes = append(writes, store.DeleteOp(pushKey(bot, pt.ID), store.Always), store.AddOp(countKey(bot, countPush(kind, pt.State)), -1, time.Time{}))
	}
	if err := s.store.Transact(ctx, writes); errors.Is(err, store.ErrConditionFailed) {
		return httpapi.NotFound("installation")
	} else if err != nil {
		return err
	}
	return nil
}

// PushKind is the kind of a push token.
type PushKind string

// The push token kinds, and their id prefixes.
const (
	PushWeb  PushKind = "web_push"
	PushAPNs PushKind = "apns"
	PushFCM  PushKind = "fcm"
)

var pushPrefixes = map[PushKind]string{PushWeb: "wps", PushAPNs: "apns", PushFCM: "fcm"}

// pushID is the id of an installation's push token of a kind: the installation id's body
// under the kind's prefix (an installation has at most one of each).
func pushID(kind PushKind, inst string) string {
	return pushPrefixes[kind] + "_" + strings.TrimPrefix(inst, "inst_")
}

// PushState is whether a push token can be sent to.
type PushState string

// The push token states.
const (
	PushActive  PushState = "active"
	PushExpired PushState = "expired"
)

// Consent is the browser's notification permission as the device reported it.
type Consent string

// The consent values (Notification.permission).
const (
	ConsentGranted Consent = "granted"
	ConsentDenied  Consent = "denied"
	ConsentDefault Consent = "default"
)

// PushToken is a push token as the API shows it: never the endpoint, keys or token.
type PushToken struct {
	ID             string    `json:"id"`
	Kind           PushKind  `json:"kind"`
	InstallationID string    `json:"installation_id"`
	State          PushState `json:"state"`
	// Consent is the browser's permission (web push only).
	Consent       Consent    `json:"consent,omitempty"`
	BrowserFamily string     `json:"browser_family,omitempty"`
	Locale        string     `json:"locale,omitempty"`
	Timezone      string     `json:"timezone,omitempty"`
	ExpiryReason  string     `json:"expiry_reason,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	ExpiredAt     *time.Time `json:"expired_at,omitempty"`
}

// pushRecord is the stored push token: the credentials sealed under aad(bot, id).
type pushRecord struct {
	PushToken
	Sealed []byte `json:"sealed"`
}

// webPushCredentials are what a web push subscription needs to be sent to.
type webPushCredentials struct {
	Endpoint string `json:"endpoint"`
	P256dh   string `json:"p256dh"`
	Auth     string `json:"auth"`
}

func pushAAD(bot, id string) []byte { return []byte(bot + "/customer-sdk/push/" + id) }

func (s *Service) loadPush(ctx context.Context, bot, id string) (pushRecord, error) {
	it, err := s.store.Get(ctx, pushKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return pushRecord{}, httpapi.NotFound("push token")
	}
	if err != nil {
		return pushRecord{}, err
	}
	pr, err := store.Decode[pushRecord](it)
	return pr, err
}

// MaxEndpointLength bounds a web push endpoint URL: the bound browser push sends under
// too (shared/pushendpoint).
const MaxEndpointLength = pushendpoint.MaxLength

// checkEndpoint refuses an endpoint that is not an https URL of printable ASCII, bounded:
// what is stored is then exactly what the browser gave (JSON decoding replaces invalid
// UTF-8 silently; a non-ASCII endpoint is refused rather than stored altered).
func checkEndpoint(p *httpapi.Problems, endpoint string) {
	if endpoint == "" {
		p.Add("endpoint", "is required")
		return
	}
	if len(endpoint) > MaxEndpointLength {
		p.Add("endpoint", "is %d characters; at most %d", len(endpoint), MaxEndpointLength)
		return
	}
	for i := 0; i < len(endpoint); i++ {
		if c := endpoint[i]; c <= ' ' || c >= 0x7f {
			p.Add("endpoint", "must be printable ASCII (a URL as the browser's PushSubscription gives it)")
			return
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
		p.Add("endpoint", "must be an https URL without credentials or fragment")
	}
}

// decodeKey decodes a subscription key as browsers give it: base64url, padding optional.
func decodeKey(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// PutWebPush records the installation's web push subscription (one per installation:
// subscribing again replaces it). A consent other than granted records it expired.
func (s *Service) PutWebPush(ctx context.Context, inst Installation, endpoint, p256dh, authKey string, consent string) (PushToken, error) {
	var pr httpapi.Problems
	if inst.Platform != PlatformWeb {
		pr.Add("kind", "web push subscriptions come from web installations")
	}
	checkEndpoint(&pr, endpoint)
	if k, err := decodeKey(p256dh); err != nil || len(p256dh) > 100 {
		pr.Add("keys.p256dh", "must be the subscription's P-256 public key, base64url")
	} else if _, err := ecdh.P256().NewPublicKey(k); err != nil {
		pr.Add("keys.p256dh", "is not a valid uncompressed P-256 public key")
	}
	if k, err := decodeKey(authKey); err != nil || len(k) != 16 {
		pr.Add("keys.auth", "must be the subscription's 16-byte auth secret, base64url")
	}
	c := Consent(consent)
	switch c {
	case "":
		c = ConsentGranted
	case ConsentGranted, ConsentDenied, ConsentDefault:
	default:
		pr.Add("consent", "must be granted, denied or default")
	}
	if err := pr.Err(); err != nil {
		return PushToken{}, err
	}
	creds, err := json.Marshal(webPushCredentials{Endpoint: endpoint, P256dh: p256dh, Auth: authKey})
	if err != nil {
		return PushToken{}, err
	}
	return s.putPush(ctx, inst, PushWeb, creds, c)
}

var (
	apnsRe = regexp.MustCompile(`^[0-9a-fA-F]{64,200}$`)
	fcmRe  = regexp.MustCompile(`^[A-Za-z0-9_:.-]+$`)
)

// PutMobileToken records the installation's APNs or FCM token.
func (s *Service) PutMobileToken(ctx context.Context, inst Installation, kind string, token string) (PushToken, error) {
	var pr httpapi.Problems
	k := PushKind(kind)
	switch k {
	case PushAPNs:
		if inst.Platform != PlatformIOS {
			pr.Add("kind", "APNs tokens come from iOS installations")
		}
		if !apnsRe.MatchString(token) {
			pr.Add("token", "must be an APNs device token: 64 to 200 hexadecimal characters")
		}
	case PushFCM:
		if inst.Platform == PlatformWeb {
			pr.Add("kind", "FCM tokens come from app installations; a browser sends a web push subscription")
		}
		if len(token) < 20 || len(token) > 4096 || !fcmRe.MatchString(token) {
			pr.Add("token", "must be an FCM registration token: 20 to 4096 characters A-Z a-z 0-9 _ : . -")
		}
	default:
		pr.Add("kind", "must be web_push, apns or fcm")
	}
	if err := pr.Err(); err != nil {
		return PushToken{}, err
	}
	return s.putPush(ctx, inst, k, []byte(token), "")
}

func (s *Service) putPush(ctx context.Context, inst Installation, kind PushKind, creds []byte, consent Consent) (PushToken, error) {
	bot, id := inst.BotID, pushID(kind, inst.ID)
	sealed, err := s.sealer.Seal(ctx, creds, pushAAD(bot, id))
	if err != nil {
		return PushToken{}, fmt.Errorf("seal push credentials: %w", err)
	}
	now := stamp(s.now())
	for range 3 {
		it, err := s.store.Get(ctx, pushKey(bot, id))
		var (
			rec  pushRecord
			cond = store.MustNotExist
			old  PushState
		)
		switch {
		case errors.Is(err, store.ErrNotFound):
			rec.PushToken = PushToken{ID: id, Kind: kind, InstallationID: inst.ID, CreatedAt: now}
		case err != nil:
			return PushToken{}, err
		default:
			if rec, err = store.Decode[pushRecord](it); err != nil {
				return PushToken{}, err
			}
			cond, old = store.RevisionIs(it.Revision), rec.State
		}
		rec.Sealed, rec.UpdatedAt, rec.Consent = sealed, now, consent
		rec.BrowserFamily, rec.Locale, rec.Timezone = inst.BrowserFamily, inst.Locale, inst.Timezone
		rec.State, rec.ExpiryReason, rec.ExpiredAt = PushActive, "", nil
		if kind == PushWeb && consent != ConsentGranted {
			rec.State, rec.ExpiryReason, rec.ExpiredAt = PushExpired, "consent_"+string(consent), &now
		}
		b, err := store.Encode(rec)
		if err != nil {
			return PushToken{}, err
		}
		writes := []store.Write{
			store.PutOp(store.Item{Key: pushKey(bot, id), Revision: it.Revision + 1, Data: b}, cond),
			store.CheckOp(instKey(bot, inst.ID), store.MustExist),
		}
		if old != rec.State {
			writes = append(writes, store.AddOp(countKey(bot, countPush(kind, rec.State)), 1, time.Time{}))
			if old != "" {
				writes = append(writes, store.AddOp(countKey(bot, countPush(kind, old)), -1, time.Time{}))
			}
		}
		err = s.store.Transact(ctx, writes)
		var ce *store.ConditionError
		switch {
		case errors.As(err, &ce) && ce.Index == 1:
			return PushToken{}, ErrInstallationToken() // revoked meanwhile
		case errors.Is(err, store.ErrConditionFailed):
			continue
		case err != nil:
			return PushToken{}, err
		}
		return rec.PushToken, nil
	}
	return PushToken{}, httpapi.E(httpapi.KindConflict, "concurrent_update", "the push token changed meanwhile; retry")
}

// WebPushSubscription is a web push subscription as browser push lists it: redacted.
type WebPushSubscription = PushToken

// WebPushSubscriptions lists the bot's web push subscriptions, newest installation first,
// limit at a time; cursor is the store's (the caller seals it for clients).
func (s *Service) WebPushSubscriptions(ctx context.Context, bot string, limit int, cursor string) ([]WebPushSubscription, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: sdkPK(bot), Prefix: pushPrefix + pushPrefixes[PushWeb] + "_", Reverse: true, Limit: limit, Cursor: cursor})
	if errors.Is(err, store.ErrInvalidCursor) {
		return nil, "", httpapi.E(httpapi.KindInvalid, "invalid_cursor", "the cursor is not one this list returned")
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]WebPushSubscription, 0, len(page.Items))
	for _, it := range page.Items {
		pr, err := store.Decode[pushRecord](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, pr.PushToken)
	}
	return out, page.Next, nil
}

// WebPushTarget opens an active subscription's endpoint and keys, for a send. Unknown or
// expired: 404.
func (s *Service) WebPushTarget(ctx context.Context, bot, subscriptionID string) (endpoint, p256dh, authKey string, err error) {
	if !strings.HasPrefix(subscriptionID, "wps_") || !ids.Valid("wps", subscriptionID) {
		return "", "", "", httpapi.NotFound("web push subscription")
	}
	pr, err := s.loadPush(ctx, bot, subscriptionID)
	if httpapi.KindOf(err) == httpapi.KindNotFound || (err == nil && pr.State != PushActive) {
		return "", "", "", httpapi.NotFound("web push subscription")
	}
	if err != nil {
		return "", "", "", err
	}
	b, err := s.sealer.Open(ctx, pr.Sealed, pushAAD(bot, pr.ID))
	if err != nil {
		return "", "", "", fmt.Errorf("open web push subscription: %w", err)
	}
	var c webPushCredentials
	if err := json.Unmarshal(b, &c); err != nil {
		return "", "", "", err
	}
	return c.Endpoint, c.P256dh, c.Auth, nil
}

// ExpireWebPush marks a subscription expired (a push service's 404/410, a key rotation):
// idempotent; unknown: 404.
func (s *Service) ExpireWebPush(ctx context.Context, bot, subscriptionID, reason string) error {
	if !ids.Valid("wps", subscriptionID) {
		return httpapi.NotFound("web push subscription")
	}
	_, err := s.expireWebPush(ctx, bot, subscriptionID, reason)
	return err
}

// expireWebPush is ExpireWebPush for a valid id; it reports whether it expired the
// subscription (false: it was expired already).
func (s *Service) expireWebPush(ctx context.Context, bot, subscriptionID, reason string) (bool, error) {
	for range 3 {
		it, err := s.store.Get(ctx, pushKey(bot, subscriptionID))
		if errors.Is(err, store.ErrNotFound) {
			return false, httpapi.NotFound("web push subscription")
		}
		if err != nil {
			return false, err
		}
		pr, err := store.Decode[pushRecord](it)
		if err != nil {
			return false, err
		}
		if pr.State == PushExpired {
			return false, nil
		}
		now := stamp(s.now())
		pr.State, pr.ExpiryReason, pr.ExpiredAt, pr.UpdatedAt = PushExpired, reason, &now, now
		b, err := store.Encode(pr)
		if err != nil {
			return false, err
		}
		err = s.store.Transact(ctx, []store.Write{
			store.PutOp(store.Item{Key: it.Key, Revision: it.Revision + 1, Data: b}, store.RevisionIs(it.Revision)),
			store.AddOp(countKey(bot, countPush(PushWeb, PushActive)), -1, time.Time{}),
			store.AddOp(countKey(bot, countPush(PushWeb, PushExpired)), 1, time.Time{}),
		})
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		return err == nil, err
	}
	return false, httpapi.E(httpapi.KindConflict, "concurrent_update", "the subscription changed meanwhile; retry")
}

// ExpireAllWebPush expires every active web push subscription of the bot (a VAPID key
// rotation: they were made for the old key) and reports how many it expired. It writes a
// page's subscriptions in as few transactions as store.MaxTransactWrites allows, each with
// the counters moved by its size; a transaction that finds one of its subscriptions changed
// meanwhile is redone one subscription at a time.
func (s *Service) ExpireAllWebPush(ctx context.Context, bot string) (int64, error) {
	var n int64
	q := store.Query{PK: sdkPK(bot), Prefix: pushPrefix + pushPrefixes[PushWeb] + "_"}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return n, err
		}
		var (
			puts   []store.Write
			subIDs []string
		)
		flush := func() error {
			if len(puts) == 0 {
				return nil
			}
			writes := append(puts,
				store.AddOp(countKey(bot, countPush(PushWeb, PushActive)), -int64(len(puts)), time.Time{}),
				store.AddOp(countKey(bot, countPush(PushWeb, PushExpired)), int64(len(puts)), time.Time{}))
			err := s.store.Transact(ctx, writes)
			switch {
			case err == nil:
				n += int64(len(puts))
			case errors.Is(err, store.ErrConditionFailed):
				for _, id := range subIDs {
					expired, err := s.expireWebPush(ctx, bot, id, "keys_rotated")
					var he *httpapi.Error
					if err != nil && !(errors.As(err, &he) && he.Kind == httpapi.KindNotFound) {
						return err // a subscription deleted meanwhile needs no expiry
					}
					if expired {
						n++
					}
				}
			default:
				return err
			}
			puts, subIDs = nil, nil
			return nil
		}
		now := stamp(s.now())
		for _, it := range page.Items {
			pr, err := store.Decode[pushRecord](it)
			if err != nil {
				return n, err
			}
			if pr.State != PushActive {
				continue
			}
			pr.State, pr.ExpiryReason, pr.ExpiredAt, pr.UpdatedAt = PushExpired, "keys_rotated", &now, now
			b, err := store.Encode(pr)
			if err != nil {
				return n, err
			}
			puts = append(puts, store.PutOp(store.Item{Key: it.Key, Revision: it.Revision + 1, Data: b}, store.RevisionIs(it.Revision)))
			subIDs = append(subIDs, pr.ID)
			if len(puts) == store.MaxTransactWrites-2 {
				if err := flush(); err != nil {
					return n, err
				}
			}
		}
		if err := flush(); err != nil {
			return n, err
		}
		if page.Next == "" {
			return n, nil
		}
		q.Cursor = page.Next
	}
}

// ActiveWebPush counts the bot's active web push subscriptions.
func (s *Service) ActiveWebPush(ctx context.Context, bot string) (int64, error) {
	return s.counter(ctx, bot, countPush(PushWeb, PushActive))
}

func (s *Service) counter(ctx context.Context, bot, name string) (int64, error) {
	it, err := s.store.Get(ctx, countKey(bot, name))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return it.Count, err
}

// ReceiptKind is what happened to a delivered push message on the device.
type ReceiptKind string

// The receipt kinds.
const (
	ReceiptDelivered ReceiptKind = "delivered"
	ReceiptClicked   ReceiptKind = "clicked"
	ReceiptClosed    ReceiptKind = "closed"
)

// ReceiptRetention is how long a receipt is remembered, for idempotence.
const ReceiptRetention = 30 * 24 * time.Hour

// RecordReceipt counts one receipt of one of the installation's push tokens, once per
// message id and kind: a device that retries counts once.
func (s *Service) RecordReceipt(ctx context.Context, inst Installation, subscriptionID, kind, messageID string) error {
	var pr httpapi.Problems
	k := ReceiptKind(kind)
	switch k {
	case ReceiptDelivered, ReceiptClicked, ReceiptClosed:
	default:
		pr.Add("kind", "must be delivered, clicked or closed")
	}
	if !messageIDRe.MatchString(messageID) {
		pr.Add("message_id", "must be 1 to 128 characters A-Z a-z 0-9 _ . : -")
	}
	mine := false
	for _, pk := range []PushKind{PushWeb, PushAPNs, PushFCM} {
		if subscriptionID == pushID(pk, inst.ID) {
			mine = true
		}
	}
	if err := pr.Err(); err != nil {
		return err
	}
	if !mine {
		return httpapi.NotFound("push token")
	}
	if _, err := s.loadPush(ctx, inst.BotID, subscriptionID); err != nil {
		return err
	}
	now := s.now()
	err := s.store.Transact(ctx, []store.Write{
		store.PutOp(store.Item{Key: receiptKey(inst.BotID, subscriptionID, messageID, k), Data: []byte("{}"), ExpiresAt: now.Add(ReceiptRetention)}, store.MustNotExist),
		store.AddOp(countKey(inst.BotID, countReceipts(k)), 1, time.Time{}),
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil // counted already
	}
	return err
}

// PushCounts are a push token kind's tokens by state.
type PushCounts struct {
	Active  int64 `json:"active"`
	Expired int64 `json:"expired"`
}

// Counts are the project's counters (GET .../customer-sdk/report).
type Counts struct {
	Installations int64                   `json:"installations"`
	PushTokens    map[PushKind]PushCounts `json:"push_tokens"`
	Receipts      map[ReceiptKind]int64   `json:"receipts"`
}

// Counts reads the bot's counters.
func (s *Service) Counts(ctx context.Context, bot string) (Counts, error) {
	c := Counts{PushTokens: map[PushKind]PushCounts{}, Receipts: map[ReceiptKind]int64{}}
	page, err := s.store.Query(ctx, store.Query{PK: sdkPK(bot), Prefix: "COUNT#"})
	if err != nil {
		return c, err
	}
	got := map[string]int64{}
	for _, it := range page.Items {
		got[strings.TrimPrefix(it.SK, "COUNT#")] = it.Count
	}
	c.Installations = got[countInstallations]
	for _, k := range []PushKind{PushWeb, PushAPNs, PushFCM} {
		c.PushTokens[k] = PushCounts{Active: got[countPush(k, PushActive)], Expired: got[countPush(k, PushExpired)]}
	}
	for _, k := range []ReceiptKind{ReceiptDelivered, ReceiptClicked, ReceiptClosed} {
		c.Receipts[k] = got[countReceipts(k)]
	}
	return c, nil
}

// InstallationOf returns one installation of the bot (404 when unknown or revoked).
func (s *Service) InstallationOf(ctx context.Context, bot, id string) (Installation, error) {
	ir, err := s.loadInst(ctx, bot, id)
	return ir.Installation, err
}
