// Package wiring composes the Meta family with the process: the deployment's Facebook app
// and Graph API endpoints (from the environment), its sealer, the tenancy check, the
// channels family in process (attachments), the jobs queue (token refreshes) and the outbox
// (the first step of a connection's refresh chain, staged in the write that activates it).
package wiring

import (
	"context"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/meta"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the meta family: the Meta connection routes, the Facebook Login callback and
// the token refresh job.
func Family() family.Family {
	return family.Family{Name: "meta", Build: func(env *family.Env) family.Parts {
		svc := Service(env, ConfigFromEnv(os.Getenv, env.PublicURL).WithAppSecret(env.CRMClientSecrets[AppSecretKey]))
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { meta.Routes(mux, svc, env.Cursors) },
			Jobs:   svc.Steps(),
		}
	}}
}

// AppSecretKey is the key of the Facebook app's secret in family.Env.CRMClientSecrets, the
// platform's map of OAuth client secrets read from SSM on AWS (docs/meta.md,
// "Configuration").
const AppSecretKey = "meta"

// The environment variables of the family's configuration. The app secret is a secret: the
// local process reads it from the environment only (never a flag, which shows in ps).
const (
	EnvAppID       = "META_APP_ID"
	EnvAppSecret   = "META_APP_SECRET"
	EnvRedirectURL = "META_REDIRECT_URL"
	EnvGraphURL    = "META_GRAPH_BASE_URL"
	EnvDialogURL   = "META_DIALOG_BASE_URL"
	EnvVersion     = "META_GRAPH_VERSION"
)

// ConfigFromEnv reads the settings from getenv (os.Getenv in production). The redirect URL
// defaults to publicURL's callback.
func ConfigFromEnv(getenv func(string) string, publicURL string) meta.Settings {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	redirect := get(EnvRedirectURL)
	if redirect == "" && publicURL != "" {
		redirect = strings.TrimRight(publicURL, "/") + "/api/meta/callback"
	}
	return meta.Settings{AppID: get(EnvAppID), AppSecret: get(EnvAppSecret), RedirectURL: redirect,
		GraphURL: get(EnvGraphURL), DialogURL: get(EnvDialogURL), Version: get(EnvVersion)}
}

// graphTimeout bounds one Graph or token endpoint call.
const graphTimeout = 15 * time.Second

// Service builds the family's service on env with settings. Tokens are sealed with
// env.CRMSecrets, the integrations' sealer (on AWS the credentials key under the
// integration encryption context, which the jobs Lambda, where refreshes run, already seals
// refreshed integration tokens under); attachments connect channels with the channels
// family's service on env.Secrets.
func Service(env *family.Env, settings meta.Settings) *meta.Service {
	sealer := env.CRMSecrets
	if sealer == nil {
		sealer = noSealer{}
	}
	var chans meta.Channels
	if c := channels.FromEnv(env); c != nil {
		chans = c
	}
	var box outbox.Stager
	if env.Outbox != nil {
		box = env.Outbox
	}
	svc, err := meta.New(meta.Config{
		Store:    env.Store,
		Sealer:   sealer,
		Bots:     env.Tenancy,
		Audit:    env.Audit,
		Limiter:  ratelimit.New(env.Store, env.Now),
		Channels: chans,
		Queue:    env.Queue,
		Outbox:   box,
		// No redirect is followed: a token endpoint or Graph never redirects, and a redirect
		// must not carry a code, the app secret or a token elsewhere.
		HTTPClient: &http.Client{Timeout: graphTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Settings: settings,
		Log:      env.Log,
		Now:      env.Now,
	})
	if err != nil {
		// Every field New checks is set above; a failure here is a programming error.
		panic(err)
	}
	return svc
}

// noSealer stands in for a process without a credentials key: nothing can be connected.
type noSealer struct{}

var errNoSealer = httpapi.E(httpapi.KindUnavailable, "secrets_unavailable", "this deployment holds no key to seal Meta tokens with")

func (noSealer) Seal(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
func (noSealer) Open(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
