package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
)

const (
	appSecretParam   = "/botplatform/test/whatsapp-app-secret"
	verifyTokenParam = "/botplatform/test/whatsapp-verify-token"
)

// awsAt is a container's AWS clients aimed at fake endpoints, with its log.
func awsAt(fake *awsfake.Server, cfg AWSConfig) (*AWS, *bytes.Buffer) {
	var logs bytes.Buffer
	return &AWS{cfg: cfg, aws: fake.Config(), log: slog.New(slog.NewJSONHandler(&logs, nil))}, &logs
}

func TestProvidersReadTheSecretsFromSSM(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		appSecretParam:   {Value: "app-s3cret\n"},
		verifyTokenParam: {Value: "verify-t0ken"},
	})
	a, logs := awsAt(fake, AWSConfig{
		Providers:        Providers{WhatsAppAppID: "1029384756", TelegramBaseURL: "http://127.0.0.1:9"},
		SecretParameters: SecretParameters{WhatsAppAppSecret: appSecretParam, WhatsAppVerifyToken: verifyTokenParam},
	})
	p, err := a.Providers(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Providers{WhatsAppAppID: "1029384756", TelegramBaseURL: "http://127.0.0.1:9",
		WhatsAppAppSecret: "app-s3cret", WhatsAppVerifyToken: "verify-t0ken"}, p)

	// The real request shape: the fake has already checked AWS JSON 1.1, the target
	// AmazonSSM.GetParameter and the SigV4 signature for ssm; here the exact body.
	calls := fake.Calls("GetParameter")
	require.Len(t, calls, 2, "each parameter is read once")
	for i, name := range []string{appSecretParam, verifyTokenParam} {
		var body map[string]any
		require.NoError(t, json.Unmarshal(calls[i], &body))
		assert.Equal(t, map[string]any{"Name": name, "WithDecryption": true}, body)
	}
	assert.Contains(t, logs.String(), appSecretParam, "the cold start says where the secrets came from")
	assert.NotContains(t, logs.String(), "app-s3cret")
	assert.NotContains(t, logs.String(), "verify-t0ken")
}

func TestProvidersWithoutParametersCallNothing(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, nil)
	// Locally (and on a Lambda that is given no parameter) the environment's values stand.
	a, _ := awsAt(fake, AWSConfig{Providers: Providers{WhatsAppAppSecret: "from-env"}})
	p, err := a.Providers(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "from-env", p.WhatsAppAppSecret)
	assert.Empty(t, fake.Calls("GetParameter"))

	// Only the named one is read.
	fake = awsfake.ParameterStore(t, map[string]awsfake.Parameter{verifyTokenParam: {Value: "vt"}})
	a, _ = awsAt(fake, AWSConfig{SecretParameters: SecretParameters{WhatsAppVerifyToken: verifyTokenParam}})
	p, err = a.Providers(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Providers{WhatsAppVerifyToken: "vt"}, p)
	assert.Len(t, fake.Calls("GetParameter"), 1)
}

// Every way a named parameter can be unusable fails the cold start with a message that names
// the parameter and its variable, never a value.
func TestProvidersRefuseUnusableParameters(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		"/plain":  {Type: "String", Value: "plain-value"},
		"/blank":  {Value: "  "},
		"/secret": {Value: "secret-value"},
	})
	for _, tt := range []struct {
		name  string
		cfg   AWSConfig
		wants []string
	}{
		{"missing", AWSConfig{SecretParameters: SecretParameters{WhatsAppAppSecret: "/botplatform/prod/none"}},
			[]string{`"/botplatform/prod/none"`, "WHATSAPP_APP_SECRET_PARAMETER", "does not exist", "aws ssm put-parameter --type SecureString --name /botplatform/prod/none"}},
		{"not a SecureString", AWSConfig{SecretParameters: SecretParameters{WhatsAppVerifyToken: "/plain"}},
			[]string{`"/plain"`, "WHATSAPP_VERIFY_TOKEN_PARAMETER", "String parameter", "SecureString"}},
		{"blank", AWSConfig{SecretParameters: SecretParameters{WhatsAppAppSecret: "/blank"}},
			[]string{`"/blank"`, "blank"}},
		{"both the value and the parameter", AWSConfig{Providers: Providers{WhatsAppAppSecret: "env-value"},
			SecretParameters: SecretParameters{WhatsAppAppSecret: "/secret"}},
			[]string{"WHATSAPP_APP_SECRET_PARAMETER", "WHATSAPP_APP_SECRET are set"}},
		{"a malformed setting besides", AWSConfig{Providers: Providers{VKBaseURL: "api.vk.com"},
			SecretParameters: SecretParameters{WhatsAppAppSecret: "/secret"}},
			[]string{"VK base URL"}},
	} {
		a, logs := awsAt(fake, tt.cfg)
		_, err := a.Providers(context.Background())
		require.Error(t, err, tt.name)
		for _, w := range tt.wants {
			assert.Contains(t, err.Error(), w, tt.name)
		}
		for _, v := range []string{"plain-value", "secret-value", "env-value"} {
			assert.NotContains(t, err.Error(), v, tt.name)
			assert.NotContains(t, logs.String(), v, tt.name)
		}
	}
}

func TestAWSConfigFromEnvReadsTheParameterNames(t *testing.T) {
	t.Setenv(EnvWhatsAppAppSecretParameter, " "+appSecretParam+" ")
	t.Setenv(EnvWhatsAppVerifyTokenParameter, verifyTokenParam)
	t.Setenv(EnvPublicURL, "https://api.example.com")
	t.Setenv(EnvWhatsAppAppSecret, "")
	t.Setenv(EnvWhatsAppVerifyToken, "")
	cfg := AWSConfigFromEnv()
	assert.Equal(t, SecretParameters{WhatsAppAppSecret: appSecretParam, WhatsAppVerifyToken: verifyTokenParam}, cfg.SecretParameters)
	assert.Equal(t, "https://api.example.com", cfg.PublicURL)
	assert.Empty(t, cfg.Providers.WhatsAppAppSecret)
}
