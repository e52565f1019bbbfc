package platform

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
)

func TestProvidersBuildTheTelegramAdapter(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TELEGRAM_BASE_URL": " http://127.0.0.1:9999 "}
	p := ProvidersFromEnv(func(k string) string { return env[k] })
	assert.Equal(t, "http://127.0.0.1:9999", p.TelegramBaseURL)
	require.NoError(t, p.Validate())
	kinds := map[channel.Kind]bool{}
	for _, a := range p.Adapters() {
		kinds[a.Kind()] = true
	}
	assert.True(t, kinds[channel.Telegram])

	bad := Providers{TelegramBaseURL: "api.telegram.org"}
	err := bad.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "telegram base URL")
	assert.NoError(t, Providers{}.Validate(), "the zero value talks to the real providers")
}

func TestDefaultProviderClientIsBounded(t *testing.T) {
	t.Parallel()
	c := DefaultProviderClient()
	assert.NotZero(t, c.Timeout)
	assert.NotNil(t, c.CheckRedirect, "no redirect may carry a token elsewhere")
}

func TestProvidersBuildTheWhatsAppAdapter(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"WHATSAPP_BASE_URL": "http://127.0.0.1:9999/v21.0", "WHATSAPP_APP_ID": "1029384756",
		"WHATSAPP_APP_SECRET": "s3cret", "WHATSAPP_VERIFY_TOKEN": "vt",
	}
	p := ProvidersFromEnv(func(k string) string { return env[k] })
	assert.Equal(t, Providers{WhatsAppBaseURL: "http://127.0.0.1:9999/v21.0", WhatsAppAppID: "1029384756",
		WhatsAppAppSecret: "s3cret", WhatsAppVerifyToken: "vt"}, p)
	require.NoError(t, p.Validate())
	var found bool
	for _, a := range p.Adapters() {
		found = found || a.Kind() == channel.WhatsApp
	}
	assert.True(t, found)

	err := Providers{WhatsAppBaseURL: "graph.facebook.com", WhatsAppAppID: "my-app"}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WhatsApp base URL")
	assert.Contains(t, err.Error(), "WhatsApp app id")
	assert.NotContains(t, err.Error(), "s3cret")
}
