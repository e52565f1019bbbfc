package platform

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/awsfake"
	crmapi "github.com/botplatform/api/shared/crm"
)

// Every way a parameter can be unusable fails the cold start with a message that names the
// parameter and its variable, never the value: for each family whose secrets the platform
// reads from SSM (readParameterSecrets).
func TestParameterSecretsRefuseUnusableParameters(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		"/blank": {Value: " \n "},
		"/plain": {Type: "String", Value: "plain-s3cret"},
	})
	readers := []struct {
		name     string
		variable string
		// read reads one secret from param; logs is what the platform logged.
		read func(param string) (got map[string]string, logs *bytes.Buffer, err error)
	}{
		{"crm client secrets", EnvCRMSalesforceClientSecretParameter, func(param string) (map[string]string, *bytes.Buffer, error) {
			a, logs := awsAt(fake, AWSConfig{CRMClientSecretParameters: map[string]string{crmapi.Salesforce: param}})
			got, err := a.CRMClientSecrets(context.Background())
			return got, logs, err
		}},
		{"ai keys", EnvAIGeminiKeyParameter, func(param string) (map[string]string, *bytes.Buffer, error) {
			a, logs := awsAt(fake, AWSConfig{AIKeyParameters: map[string]string{aiapi.Gemini: param}})
			got, err := a.AIKeys(context.Background())
			return got, logs, err
		}},
	}
	for _, r := range readers {
		for _, tt := range []struct {
			name, param string
			wants       []string
		}{
			{"blank", "/blank", []string{"blank"}},
			{"not a SecureString", "/plain", []string{"String parameter", "SecureString"}},
			{"missing", "/botplatform/prod/none", []string{"does not exist", "aws ssm put-parameter --type SecureString --name /botplatform/prod/none"}},
		} {
			name := r.name + ": " + tt.name
			got, logs, err := r.read(tt.param)
			require.Error(t, err, name)
			assert.Nil(t, got, name)
			for _, w := range append(tt.wants, `"`+tt.param+`"`, r.variable) {
				assert.Contains(t, err.Error(), w, name)
			}
			assert.NotContains(t, err.Error(), "plain-s3cret", name)
			assert.NotContains(t, logs.String(), "plain-s3cret", name)
		}
	}
}
