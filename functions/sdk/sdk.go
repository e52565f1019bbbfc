// Package sdk serves the customer SDK's device surface, /sdk/v1/*: what apps and web pages
// call with a project key and then an installation token, outside the token API (spec
// 4.5, 5.6). It also serves its own OpenAPI document (GET /sdk/openapi.yaml) and the
// browser SDK and service worker scripts. The data is the customersdk family's and the
// VAPID key browser push's, each reached through an interface declared here and
// implemented in functions/sdk/wiring.
package sdk

import (
	"context"
	_ "embed"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/docs"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

//go:embed sdk.js
var script []byte

//go:embed sw.js
var serviceWorker []byte

// Device is an authenticated installation as this surface needs it.
type Device struct {
	ID       string
	BotID    string
	Platform string
	// AppID is the installation's web origin (web) or app id.
	AppID string
	// UserID is the identified user, "" while anonymous.
	UserID string
	// WebOrigins is the project's web allowlist now.
	WebOrigins []string
}

// Registration is a device's registration request as the customer SDK takes it.
type Registration struct {
	ProjectKey, Platform, AppID, Origin, SDKVersion, Locale, Timezone, UserAgent string
}

// Devices is the customer SDK's device side (functions/customersdk through the wiring).
// The views returned are serialized as they are.
type Devices interface {
	// ProjectOf returns the bot whose project key this is, checked offline by its signature
	// (401 invalid_project_key when it is not one of this deployment's), so that a
	// registration is counted against its project before anything is read or written.
	ProjectOf(projectKey string) (bot string, err error)
	Register(ctx context.Context, in Registration) (view any, token string, err error)
	Authenticate(ctx context.Context, token string) (Device, error)
	Identify(ctx context.Context, d Device, userID, userHash string, epoch int) (any, error)
	PutWebPush(ctx context.Context, d Device, endpoint, p256dh, authKey, consent string) (any, error)
	PutMobileToken(ctx context.Context, d Device, kind, token string) (any, error)
	RecordReceipt(ctx context.Context, d Device, subscriptionID, kind, messageID string) error
}

// PushKeys is browser push's public side: the bot's VAPID public key (functions/webpush).
type PushKeys interface {
	PublicKey(ctx context.Context, bot string) (key string, enabled bool, err error)
}

// Limits of the device surface: per installation (a device in a loop), per project (a
// whole site or app, registrations included) and, for registrations, per client address
// within a project (a script minting installations from one machine), all shared by every
// process via the store. A device registers once and keeps its token, so real registrations
// from one address are rare; the per-address limit still leaves room for many devices
// behind one carrier-grade NAT address.
var (
	InstallationLimit        = ratelimit.Limit{Name: "sdk device calls", Max: 120, Window: time.Minute}
	ProjectLimit             = ratelimit.Limit{Name: "sdk project calls", Max: 6000, Window: time.Minute}
	RegistrationAddressLimit = ratelimit.Limit{Name: "sdk registrations per address", Max: 300, Window: time.Minute}
)

// Handlers serves the device surface.
type Handlers struct {
	perInst ratelimit.Limit
	perProj ratelimit.Limit
	perAddr ratelimit.Limit
	devices Devices
	push    PushKeys
	events  eventlog.Log
	limiter *ratelimit.Limiter
	now     func() time.Time
	log     *slog.Logger
}

// Config is what the surface is built on. Devices, Limiter and Now are required; Push may
// be nil (web push is then reported disabled), Events nil (events are accepted, kept nowhere).
type Config struct {
	Devices Devices
	Push    PushKeys
	Events  eventlog.Log
	Limiter *ratelimit.Limiter
	Now     func() time.Time
	Log     *slog.Logger
	// InstallationLimit, ProjectLimit and RegistrationAddressLimit override the package's
	// limits (zero: the default).
	InstallationLimit, ProjectLimit, RegistrationAddressLimit ratelimit.Limit
}

// Routes registers the device surface. Every route is public to the kernel (no PAT or bot
// token is accepted, or looked at): the handlers authenticate the installation token.
func Routes(mux *httpapi.Mux, c Config) {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.InstallationLimit.Max == 0 {
		c.InstallationLimit = InstallationLimit
	}
	if c.ProjectLimit.Max == 0 {
		c.ProjectLimit = ProjectLimit
	}
	if c.RegistrationAddressLimit.Max == 0 {
		c.RegistrationAddressLimit = RegistrationAddressLimit
	}
	h := &Handlers{perInst: c.InstallationLimit, perProj: c.ProjectLimit, perAddr: c.RegistrationAddressLimit, devices: c.Devices, push: c.Push, events: c.Events, limiter: c.Limiter, now: c.Now, log: c.Log}
	pub := httpapi.Public()
	mux.Handle("GET /sdk/openapi.yaml", pub, h.openapi)
	mux.Handle("GET /sdk/v1/sdk.js", pub, h.static(script))
	mux.Handle("GET /sdk/v1/sw.js", pub, h.static(serviceWorker))
	for _, p := range []string{"/sdk/v1/installations", "/sdk/v1/identify", "/sdk/v1/push-tokens", "/sdk/v1/receipts", "/sdk/v1/events", "/sdk/v1/web-push/config"} {
		mux.Handle("OPTIONS "+p, pub, h.preflight)
	}
	mux.Handle("POST /sdk/v1/installations", pub, h.register)
	mux.Handle("POST /sdk/v1/identify", pub, h.device(h.identify))
	mux.Handle("POST /sdk/v1/push-tokens", pub, h.device(h.pushToken))
	mux.Handle("POST /sdk/v1/receipts", pub, h.device(h.receipt))
	mux.Handle("POST /sdk/v1/events", pub, h.device(h.event))
	mux.Handle("GET /sdk/v1/web-push/config", pub, h.device(h.webPushConfig))
}

func (h *Handlers) openapi(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(docs.SDKOpenAPI)
	return err
}

func (h *Handlers) static(b []byte) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) error {
		hd := w.Header()
		hd.Set("Content-Type", "text/javascript; charset=utf-8")
		hd.Set("Cache-Control", "public, max-age=300")
		hd.Set("X-Content-Type-Options", "nosniff")
		// Any site may load the scripts; they carry nothing of any project.
		hd.Set("Access-Control-Allow-Origin", "*")
		hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(b)
		return err
	}
}

// preflight lets any page ask: what it may then do is decided by the request itself, which
// carries the project key or installation token the Origin is checked against (an answer
// to a refused origin carries no Access-Control-Allow-Origin, so its page cannot read it).
func (h *Handlers) preflight(w http.ResponseWriter, r *http.Request) error {
	hd := w.Header()
	hd.Add("Vary", "Origin")
	if o := r.Header.Get("Origin"); o != "" {
		hd.Set("Access-Control-Allow-Origin", o)
	}
	hd.Set("Access-Control-Allow-Methods", "GET, POST")
	hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	hd.Set("Access-Control-Max-Age", "600")
	return httpapi.NoContent(w)
}

// allow lets the page of an origin the project allows read the answer, errors included.
func allow(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
	w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
}

func errOrigin() error {
	return httpapi.E(httpapi.KindForbidden, "origin_not_allowed", "this origin is not the installation's, or no longer in the project's allowlist")
}

// registerRequest is POST /sdk/v1/installations.
type registerRequest struct {
	ProjectKey string `json:"project_key"`
	Platform   string `json:"platform"`
	AppID      string `json:"app_id"`
	SDKVersion string `json:"sdk_version"`
	Locale     string `json:"locale"`
	Timezone   string `json:"timezone"`
}

// Validate checks what needs no project.
func (v *registerRequest) Validate() error {
	var p httpapi.Problems
	p.Require("project_key", v.ProjectKey)
	return p.Err()
}

func (h *Handlers) register(w http.ResponseWriter, r *http.Request) error {
	w.Header().Add("Vary", "Origin")
	var req registerRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	// Counted before anything is read or written: the client's address within the project
	// first (one machine in a loop is stopped before it spends the project's budget), then
	// the project's budget, which its devices' other calls share.
	bot, err := h.devices.ProjectOf(req.ProjectKey)
	if err != nil {
		return err
	}
	if addr := clientAddress(r); addr != "" {
		if err := h.limiter.Allow(r.Context(), h.perAddr, bot+"#"+addr); err != nil {
			return err
		}
	}
	if err := h.limiter.Allow(r.Context(), h.perProj, bot); err != nil {
		return err
	}
	view, tok, err := h.devices.Register(r.Context(), Registration{ProjectKey: req.ProjectKey, Platform: req.Platform, AppID: req.AppID,
		Origin: r.Header.Get("Origin"), SDKVersion: req.SDKVersion, Locale: req.Locale, Timezone: req.Timezone, UserAgent: r.UserAgent()})
	if err != nil {
		return err
	}
	if r.Header.Get("Origin") != "" {
		allow(w, r) // Register checked the origin against the allowlist
	}
	w.Header().Set("Cache-Control", "no-store")
	return httpapi.WriteJSON(w, http.StatusCreated, registered{View: view, Token: tok})
}

// clientAddress is the address the request came from as the kernel gives it: the peer of
// the connection locally (RemoteAddr "ip:port"), API Gateway's source IP on AWS (the Lambda
// adapter puts it in RemoteAddr, without a port). An IPv6 address is reduced to its /64,
// which one subscriber line gets whole. "" when there is none.
func clientAddress(r *http.Request) string {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// registered is the registration answer: the installation and its token, shown once.
type registered struct {
	View  any
	Token string
}

// MarshalJSON flattens the installation and adds token.
func (r registered) MarshalJSON() ([]byte, error) {
	b, err := jsonMarshal(r.View)
	if err != nil {
		return nil, err
	}
	tok, err := jsonMarshal(r.Token)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSuffix(string(b), "}")
	if s != "{" {
		s += ","
	}
	return []byte(s + `"token":` + string(tok) + "}"), nil
}

// device authenticates the installation token, checks the Origin, applies the rate
// limits, then serves.
func (h *Handlers) device(next func(w http.ResponseWriter, r *http.Request, d Device) error) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Add("Vary", "Origin")
		tok, err := auth.BearerToken(r.Header.Get("Authorization"))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sdk"`)
			return httpapi.E(httpapi.KindUnauthenticated, "missing_credentials", "send the installation token as Authorization: Bearer mbi_...")
		}
		d, err := h.devices.Authenticate(r.Context(), tok)
		if err != nil {
			if httpapi.KindOf(err) == httpapi.KindUnauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sdk", error="invalid_token"`)
			}
			return err
		}
		if o := r.Header.Get("Origin"); o != "" {
			if d.Platform != "web" || o != d.AppID || !contains(d.WebOrigins, o) {
				return errOrigin()
			}
			allow(w, r)
		}
		if err := h.limiter.Allow(r.Context(), h.perInst, d.ID); err != nil {
			return err
		}
		if err := h.limiter.Allow(r.Context(), h.perProj, d.BotID); err != nil {
			return err
		}
		return next(w, r, d)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// identifyRequest is POST /sdk/v1/identify.
type identifyRequest struct {
	UserID        string `json:"user_id"`
	UserHash      string `json:"user_hash"`
	IdentityEpoch int    `json:"identity_epoch"`
}

func (h *Handlers) identify(w http.ResponseWriter, r *http.Request, d Device) error {
	var req identifyRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	v, err := h.devices.Identify(r.Context(), d, req.UserID, req.UserHash, req.IdentityEpoch)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

// pushTokenRequest is POST /sdk/v1/push-tokens: a web push subscription (kind web_push,
// subscription as PushSubscription.toJSON() gives it, minus expirationTime) or an APNs/FCM
// token.
type pushTokenRequest struct {
	Kind         string        `json:"kind"`
	Subscription *subscription `json:"subscription"`
	Consent      string        `json:"consent"`
	Token        string        `json:"token"`
}

type subscription struct {
	Endpoint       string  `json:"endpoint"`
	ExpirationTime *int64  `json:"expirationTime"`
	Keys           subKeys `json:"keys"`
}

type subKeys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// Validate checks the members each kind takes.
func (v *pushTokenRequest) Validate() error {
	var p httpapi.Problems
	switch v.Kind {
	case "web_push":
		if v.Subscription == nil {
			p.Add("subscription", "is required for web_push")
		}
		if v.Token != "" {
			p.Add("token", "is for apns and fcm; web_push sends subscription")
		}
	case "apns", "fcm":
		if v.Subscription != nil {
			p.Add("subscription", "is for web_push")
		}
		if v.Consent != "" {
			p.Add("consent", "is for web_push")
		}
	case "":
		p.Add("kind", "is required: web_push, apns or fcm")
	default:
		p.Add("kind", "must be web_push, apns or fcm")
	}
	return p.Err()
}

func (h *Handlers) pushToken(w http.ResponseWriter, r *http.Request, d Device) error {
	var req pushTokenRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	var (
		v   any
		err error
	)
	if req.Kind == "web_push" {
		s := req.Subscription
		v, err = h.devices.PutWebPush(r.Context(), d, s.Endpoint, s.Keys.P256dh, s.Keys.Auth, req.Consent)
	} else {
		v, err = h.devices.PutMobileToken(r.Context(), d, req.Kind, req.Token)
	}
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, v)
}

// receiptRequest is POST /sdk/v1/receipts.
type receiptRequest struct {
	SubscriptionID string `json:"subscription_id"`
	Kind           string `json:"kind"`
	MessageID      string `json:"message_id"`
}

func (h *Handlers) receipt(w http.ResponseWriter, r *http.Request, d Device) error {
	var req receiptRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	if err := h.devices.RecordReceipt(r.Context(), d, req.SubscriptionID, req.Kind, req.MessageID); err != nil {
		return err
	}
	return httpapi.NoContent(w)
}

// MaxEvents is the most events one request posts.
const MaxEvents = 20

// eventsRequest is POST /sdk/v1/events.
type eventsRequest struct {
	Events []eventInput `json:"events"`
}

type eventInput struct {
	// EventID is the device's id of the event: a replay with the same id stores nothing.
	EventID    string         `json:"event_id"`
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties"`
}

// Validate checks every event (all problems at once).
func (v *eventsRequest) Validate() error {
	var p httpapi.Problems
	if len(v.Events) == 0 || len(v.Events) > MaxEvents {
		p.Add("events", "must hold 1 to %d events", MaxEvents)
	}
	for i, e := range v.Events {
		f := "events[" + strconv.Itoa(i) + "]"
		if err := eventlog.CheckClientEventID(e.EventID); err != nil {
			p.Add(f+".event_id", "%v", err)
		}
		if err := eventlog.CheckName(e.Name); err != nil {
			p.Add(f+".name", "%v", err)
		} else if eventlog.Reserved(e.Name) {
			p.Add(f+".name", "is a platform event's name")
		}
		if len(e.Properties) > eventlog.MaxProperties-2 {
			p.Add(f+".properties", "has %d members; at most %d", len(e.Properties), eventlog.MaxProperties-2)
		}
		for k, val := range e.Properties {
			if err := eventlog.CheckPropertyKey(k); err != nil {
				p.Add(f+".properties."+k, "%v", err)
			} else if err := eventlog.CheckPropertyValue(val); err != nil {
				p.Add(f+".properties."+k, "%v", err)
			}
		}
	}
	return p.Err()
}

// event appends the device's events to the bot's event log, as custom events carrying the
// installation (and the identified user) as properties: the log's subscribers are the
// bot's, which a device is not.
func (h *Handlers) event(w http.ResponseWriter, r *http.Request, d Device) error {
	var req eventsRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	now := h.now()
	evs := make([]eventlog.Event, 0, len(req.Events))
	for _, e := range req.Events {
		props := map[string]any{"sdk_installation_id": d.ID}
		for k, v := range e.Properties {
			props[k] = v
		}
		if d.UserID != "" {
			props["sdk_user_id"] = d.UserID
		}
		evs = append(evs, eventlog.Event{ID: eventlog.CauseID("sdk:" + d.ID + ":" + e.EventID), BotID: d.BotID, Name: e.Name, At: now,
			Channel: d.Platform, Source: eventlog.SourceCustom, Properties: props, ClientEventID: e.EventID})
	}
	for _, e := range evs {
		if err := eventlog.Validate(e); err != nil {
			return httpapi.Errorf(httpapi.KindInvalid, "validation_failed", "%v", err)
		}
	}
	n := 0
	if h.events != nil {
		var err error
		if n, err = h.events.Append(r.Context(), evs...); err != nil {
			return err
		}
	}
	return httpapi.WriteJSON(w, http.StatusAccepted, map[string]int{"accepted": len(evs), "new": n})
}

// webPushConfig is what a browser needs to subscribe.
type webPushConfig struct {
	Enabled        bool    `json:"enabled"`
	VAPIDPublicKey *string `json:"vapid_public_key"`
}

func (h *Handlers) webPushConfig(w http.ResponseWriter, r *http.Request, d Device) error {
	out := webPushConfig{}
	if h.push != nil {
		key, enabled, err := h.push.PublicKey(r.Context(), d.BotID)
		if err != nil && httpapi.KindOf(err) != httpapi.KindNotFound {
			return err
		}
		if err == nil && enabled && key != "" {
			out = webPushConfig{Enabled: true, VAPIDPublicKey: &key}
		}
	}
	return httpapi.WriteJSON(w, http.StatusOK, out)
}
