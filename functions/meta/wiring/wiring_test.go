package wiring

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/functions/meta"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	none := ConfigFromEnv(func(string) string { return "" }, "")
	assert.False(t, none.Configured(), "no app without its id, secret and redirect URL")

	env := map[string]string{EnvAppID: "874512093651234", EnvAppSecret: " s3cret ", EnvGraphURL: "http://127.0.0.1:9"}
	cfg := ConfigFromEnv(func(k string) string { return env[k] }, "https://api.example/")
	assert.Equal(t, meta.Settings{AppID: "874512093651234", AppSecret: "s3cret", RedirectURL: "https://api.example/api/meta/callback",
		GraphURL: "http://127.0.0.1:9"}, cfg)
	assert.True(t, cfg.Configured())
	env[EnvRedirectURL] = "https://app.example/meta/done"
	assert.Equal(t, "https://app.example/meta/done", ConfigFromEnv(func(k string) string { return env[k] }, "https://api.example").RedirectURL)

	// On AWS the secret comes from SSM (family.Env.CRMClientSecrets[AppSecretKey]).
	assert.Equal(t, "from-ssm", cfg.WithAppSecret("from-ssm").AppSecret)
	assert.Equal(t, "s3cret", cfg.WithAppSecret("").AppSecret)
}
