package platform

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/telegram"
	"github.com/botplatform/api/shared/channel/vk"
	"github.com/botplatform/api/shared/channel/whatsapp"
)

// Providers configures the clients of the messaging providers: where each provider's API
// is (tests and self-hosted servers point them elsewhere) and the HTTP client they share.
// The zero value talks to the real providers.
type Providers struct {
	// HTTPClient makes every provider call; nil means DefaultProviderClient().
	HTTPClient *http.Client
	// TelegramBaseURL is the Bot API server ("" means https://api.telegram.org).
	TelegramBaseURL string
	// VKBaseURL is the VK API endpoint ("" means https://api.vk.com/method).
	VKBaseURL string
	// WhatsAppBaseURL is the Graph API root with its version ("" means
	// https://graph.facebook.com/v21.0).
	WhatsAppBaseURL string
	// WhatsAppAppID is the Meta app's id: template header media are uploaded under it
	// (not secret). Without it, header media uploads answer 503.
	WhatsAppAppID string
	// WhatsAppAppSecret is the Meta app's secret, which signs every WhatsApp webhook; and
	// WhatsAppVerifyToken is the token Meta presents when the webhook URL is registered. Both
	// are secrets: locally read from the environment only, never from flags (which show in
	// ps); on AWS from SSM SecureString parameters (AWS.Providers), never from the
	// environment or the template.
	WhatsAppAppSecret   string
	WhatsAppVerifyToken string
	// AllowPrivateMediaURLs lets adapters that download media themselves (VK uploads them)
	// fetch from loopback and private addresses: the local process, whose media and fakes
	// live on the machine. Off on AWS, where such a URL could reach the instance metadata.
	AllowPrivateMediaURLs bool
}

// The environment variables of the provider configuration. infra/stack sets the AWS ones
// (never the two secrets: on AWS they come from SSM, see AWS.Providers).
const (
	EnvPublicURL           = "PUBLIC_URL"
	EnvTelegramBaseURL     = "TELEGRAM_BASE_URL"
	EnvVKBaseURL           = "VK_BASE_URL"
	EnvWhatsAppBaseURL     = "WHATSAPP_BASE_URL"
	EnvWhatsAppAppID       = "WHATSAPP_APP_ID"
	EnvWhatsAppAppSecret   = "WHATSAPP_APP_SECRET"
	EnvWhatsAppVerifyToken = "WHATSAPP_VERIFY_TOKEN"
	// The names of the SSM SecureString parameters that hold the two secrets on AWS.
	EnvWhatsAppAppSecretParameter   = "WHATSAPP_APP_SECRET_PARAMETER"
	EnvWhatsAppVerifyTokenParameter = "WHATSAPP_VERIFY_TOKEN_PARAMETER"
)

// ProvidersFromEnv reads the provider configuration from environment variables (getenv is
// os.Getenv in production): TELEGRAM_BASE_URL, VK_BASE_URL, WHATSAPP_BASE_URL,
// WHATSAPP_APP_ID, WHATSAPP_APP_SECRET, WHATSAPP_VERIFY_TOKEN.
func ProvidersFromEnv(getenv func(string) string) Providers {
	return Providers{
		TelegramBaseURL:     strings.TrimSpace(getenv(EnvTelegramBaseURL)),
		VKBaseURL:           strings.TrimSpace(getenv(EnvVKBaseURL)),
		WhatsAppBaseURL:     strings.TrimSpace(getenv(EnvWhatsAppBaseURL)),
		WhatsAppAppID:       strings.TrimSpace(getenv(EnvWhatsAppAppID)),
		WhatsAppAppSecret:   strings.TrimSpace(getenv(EnvWhatsAppAppSecret)),
		WhatsAppVerifyToken: strings.TrimSpace(getenv(EnvWhatsAppVerifyToken)),
	}
}

// Validate reports every malformed setting at once.
func (p Providers) Validate() error {
	var errs []error
	if p.TelegramBaseURL != "" {
		if err := telegram.CheckBaseURL(p.TelegramBaseURL); err != nil {
			errs = append(errs, errors.New("telegram base URL "+err.Error()))
		}
	}
	if p.VKBaseURL != "" {
		if err := vk.CheckBaseURL(p.VKBaseURL); err != nil {
			errs = append(errs, errors.New("VK base URL "+err.Error()))
		}
	}
	if p.WhatsAppBaseURL != "" {
		if err := whatsapp.CheckBaseURL(p.WhatsAppBaseURL); err != nil {
			errs = append(errs, errors.New("WhatsApp base URL "+err.Error()))
		}
	}
	if p.WhatsAppAppID != "" && !whatsapp.ValidAppID(p.WhatsAppAppID) {
		errs = append(errs, errors.New("WhatsApp app id: want the numeric id of the Meta app"))
	}
	return errors.Join(errs...)
}

// DefaultProviderClient is the HTTP client of provider calls: every call bounded (15 s in
// all, 5 s to connect and to get response headers), no redirects followed (a provider API
// never redirects, and a redirect must not carry a token elsewhere).
func DefaultProviderClient() *http.Client {
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: 10 * time.Second,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Adapters builds the adapter of every provider this build speaks to.
func (p Providers) Adapters() []channel.Adapter {
	client := p.HTTPClient
	if client == nil {
		client = DefaultProviderClient()
	}
	return []channel.Adapter{
		telegram.New(telegram.Config{BaseURL: p.TelegramBaseURL, HTTPClient: client}),
		vk.New(vk.Config{BaseURL: p.VKBaseURL, HTTPClient: client, AllowPrivateDownloads: p.AllowPrivateMediaURLs}),
		// WhatsApp gets p.HTTPClient only when one is set: it uploads header media of up to
		// 100 MB, which the default client's 15 s timeout would cut, and bounds each call
		// with its own deadline instead (30 s, 10 min for uploads).
		whatsapp.New(whatsapp.Config{BaseURL: p.WhatsAppBaseURL, HTTPClient: p.HTTPClient, AppID: p.WhatsAppAppID,
			AppSecret: p.WhatsAppAppSecret, AllowPrivateDownloads: p.AllowPrivateMediaURLs}),
	}
}
