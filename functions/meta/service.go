// Package meta serves an account's messenger-platform (Meta) connections: a Facebook Login
// handoff (golang.org/x/oauth2 against the deployment's Facebook app, single-use state),
// the callback that turns its code into a sealed long-lived user token and reads the assets
// the customer owns (Facebook pages, Instagram professional accounts, WhatsApp Business
// accounts and their phone numbers), the check of those assets' permissions and status, the
// selection of the ones the customer uses, their attachment to a bot as channels (through
// the channels family in process) and the refresh of long-lived tokens before they expire.
// No token ever leaves the service: responses, logs, audit events and errors hold none.
// docs/meta.md holds the decisions.
package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store"
)

// StartLimit bounds an account's Facebook Login starts: each is a pending authorization kept
// for 5 minutes. A sliding window: at most 3 in any minute (as the CRM family's starts).
var StartLimit = ratelimit.Limit{Name: "Meta OAuth starts", Max: 3, Window: time.Minute}

// StateTTL is how long a start's state is accepted by the callback.
const StateTTL = 5 * time.Minute

// RefreshWindow is how long before its expiry a long-lived token is exchanged for a new one.
const RefreshWindow = 7 * 24 * time.Hour

// DefaultVersion is the Graph API version the family speaks unless configured.
const DefaultVersion = "v21.0"

// Scopes are the permissions the Facebook Login dialog asks for.
var Scopes = []string{
	"pages_show_list", "pages_messaging", "instagram_basic", "instagram_manage_messages",
	"whatsapp_business_management", "whatsapp_business_messaging", "business_management",
}

// Settings are the deployment's Facebook app and Graph API endpoints (wiring reads them from
// the environment).
type Settings struct {
	AppID     string
	AppSecret string
	// RedirectURL is this deployment's callback (<public URL>/api/meta/callback), registered
	// as a valid OAuth redirect URI of the app.
	RedirectURL string
	// GraphURL is the Graph API's root without a version (https://graph.facebook.com).
	GraphURL string
	// DialogURL is the Facebook Login dialog's root without a version (https://www.facebook.com).
	DialogURL string
	// Version is the Graph API version (v21.0).
	Version string
}

// Configured reports whether starts can be made.
func (s Settings) Configured() bool {
	return s.AppID != "" && s.AppSecret != "" && s.RedirectURL != ""
}

// WithAppSecret returns s with secret as its app secret when secret is set: what the
// platform read from SSM on AWS, in place of the META_APP_SECRET variable.
func (s Settings) WithAppSecret(secret string) Settings {
	if secret != "" {
		s.AppSecret = secret
	}
	return s
}

// Channels is what the family needs of the channels family: connecting a channel with a
// kind's credentials (channels.Service.Connect), disconnecting one whose connection was
// deleted while it was being attached (Disconnect), giving it a refreshed token
// (ReplaceCredentials), reading one (is an attachment's channel still there?) and knowing
// which kinds the deployment has.
type Channels interface {
	Connect(ctx context.Context, account, bot string, k channel.Kind, name string, creds any) (channels.Channel, error)
	Disconnect(ctx context.Context, bot, id string) error
	ReplaceCredentials(ctx context.Context, bot, id string, creds any) (channels.Channel, error)
	Get(ctx context.Context, bot, id string) (channels.Channel, error)
	Adapter(k channel.Kind) (channel.Adapter, bool)
}

// Config is the family's dependencies. Store, Sealer, Bots, Audit, Log and Now are required.
type Config struct {
	Store store.Store
	// Sealer seals the long-lived user tokens.
	Sealer secrets.Sealer
	// Bots is the tenancy check of the bot an asset is attached to.
	Bots httpapi.BotLoader
	// Audit receives the callback's audit event (the kernel audits authenticated routes).
	Audit audit.Publisher
	// Limiter counts starts; nil counts none.
	Limiter *ratelimit.Limiter
	// Channels connects attached assets as channels; nil answers attachments 503.
	Channels Channels
	// Queue carries the refresh chains' steps, through the outbox (delayed until a token is
	// due); nil with no Outbox schedules none (the connection then expires with its token).
	Queue queue.Sender
	// Outbox stages each step of a connection's refresh chain in the transaction that names
	// it (activation, reconnection, the step before: shared/outbox, family.Env.Outbox), so
	// that no step is lost to the process or the queue after the commit. Nil with a Queue: an
	// outbox over Store and Queue (the platform's sweep relays every outbox item of the
	// table); nil without one: no chain is started.
	Outbox outbox.Stager
	// HTTPClient calls the Graph API and the token endpoint; nil is a bounded default.
	HTTPClient *http.Client
	Settings   Settings
	Log        *slog.Logger
	Now        func() time.Time
}

// Validate reports every missing dependency at once.
func (c Config) Validate() error {
	var errs []error
	for _, m := range []struct {
		name    string
		missing bool
	}{
		{"Store", c.Store == nil}, {"Sealer", c.Sealer == nil}, {"Bots", c.Bots == nil}, {"Audit", c.Audit == nil},
		{"Log", c.Log == nil}, {"Now", c.Now == nil},
	} {
		if m.missing {
			errs = append(errs, errors.New(m.name+" is required"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	return nil
}

// Service is the Meta connections of every account.
type Service struct {
	store    store.Store
	sealer   secrets.Sealer
	bots     httpapi.BotLoader
	audit    audit.Publisher
	limiter  *ratelimit.Limiter
	channels Channels
	outbox   outbox.Stager
	graph    *graph
	settings Settings
	log      *slog.Logger
	now      func() time.Time
	// maxPages bounds the pages read of one Graph edge (tests make it small).
	maxPages int
}

// New returns the Service, or the problems of cfg.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st := cfg.Settings
	st.GraphURL = strings.TrimRight(cmpOr(st.GraphURL, "https://graph.facebook.com"), "/")
	st.DialogURL = strings.TrimRight(cmpOr(st.DialogURL, "https://www.facebook.com"), "/")
	st.Version = cmpOr(st.Version, DefaultVersion)
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	box := cfg.Outbox
	if box == nil && cfg.Queue != nil {
		o, err := outbox.New(cfg.Store, cfg.Queue, outbox.Config{Now: cfg.Now, Log: cfg.Log})
		if err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
		box = o
	}
	return &Service{store: cfg.Store, sealer: cfg.Sealer, bots: cfg.Bots, audit: cfg.Audit, limiter: cfg.Limiter,
		channels: cfg.Channels, outbox: box, settings: st, log: cfg.Log, now: cfg.Now, maxPages: defaultMaxPages,
		graph: &graph{base: st.GraphURL + "/" + st.Version, appID: st.AppID, appSecret: st.AppSecret, http: hc}}, nil
}

func cmpOr(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return strings.TrimSpace(v)
}

// stamp is a resource timestamp: UTC, whole seconds.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// The states of a connection.
const (
	// StatusPending: started, waiting for the Facebook Login dialog's callback.
	StatusPending = "pending"
	// StatusActive: the token worked when last used.
	StatusActive = "active"
	// StatusFailed: the dialog was denied, the code refused or the callback never came.
	StatusFailed = "failed"
	// StatusExpired: Graph refused the token (expired, revoked, password changed: code 190).
	StatusExpired = "expired"
)

// User is the Facebook user who granted the connection.
type User struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Counts are how many assets of each kind the connection sees.
type Counts struct {
	Pages                    int `json:"pages"`
	InstagramAccounts        int `json:"instagram_accounts"`
	WhatsAppBusinessAccounts int `json:"whatsapp_business_accounts"`
	WhatsAppPhoneNumbers     int `json:"whatsapp_phone_numbers"`
}

// Connection is a Meta connection as the API shows it: never a token.
type Connection struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// FailureReason says why a connection is failed or expired (access_denied,
	// code_rejected, authorization_timeout, token_rejected, ...).
	FailureReason string `json:"failure_reason,omitempty"`
	// User is who granted it (after the callback).
	User *User `json:"facebook_user,omitempty"`
	// GrantedPermissions and DeclinedPermissions are what the user granted and declined in
	// the dialog, as Graph reported them last.
	GrantedPermissions  []string `json:"granted_permissions"`
	DeclinedPermissions []string `json:"declined_permissions"`
	// ExpiresAt is when the long-lived token expires (nil before the callback, or for a
	// token that does not expire).
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	RefreshedAt *time.Time `json:"refreshed_at,omitempty"`
	AssetCounts Counts     `json:"asset_counts"`
	Revision    int64      `json:"revision"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// record is a connection as stored: the API form and who started it.
type record struct {
	Connection
	AccountID string `json:"account_id"`
	// StateExpiresAt is when a pending connection's start stops being accepted.
	StateExpiresAt time.Time `json:"state_expires_at"`
	// RefreshChain names the connection's one live refresh chain (JobRefresh): a step whose
	// payload names another ends without doing anything. Each activation and reconnection
	// gives it a new one, in the write that starts that chain (docs/meta.md, "Refresh").
	// Empty: a connection of before chains were named (adopted by its first refresh step).
	RefreshChain string `json:"refresh_chain,omitempty"`
}

// view is the connection as the API shows it at now: a pending one whose state has expired
// is failed (authorization_timeout), without a write.
func (s *Service) view(rec record) Connection {
	c := rec.Connection
	if c.Status == StatusPending && !s.now().Before(rec.StateExpiresAt) {
		c.Status, c.FailureReason = StatusFailed, "authorization_timeout"
	}
	if c.GrantedPermissions == nil {
		c.GrantedPermissions = []string{}
	}
	if c.DeclinedPermissions == nil {
		c.DeclinedPermissions = []string{}
	}
	return c
}

// credRecord is a connection's stored token.
type credRecord struct {
	// Sealed is the long-lived user token, sealed under credAAD.
	Sealed []byte `json:"sealed"`
	// Expiry is the token's (zero: it does not expire).
	Expiry    time.Time `json:"expiry,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
}

func item(key store.Key, rev int64, v any) (store.Item, error) {
	b, err := store.Encode(v)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: key, Revision: rev, Data: b}, nil
}

// errNotConfigured is the 503 of a deployment without a Facebook app.
var errNotConfigured = httpapi.E(httpapi.KindUnavailable, "meta_not_configured",
	"this deployment has no Facebook app for Meta connections (its app id, app secret and redirect URL)")

// safeCode returns a provider's error code when it looks like one (short, no spaces or
// markup), "" otherwise: it is echoed to the client.
func safeCode(s string) string {
	if len(s) == 0 || len(s) > 64 {
		return ""
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ""
		}
	}
	return s
}
