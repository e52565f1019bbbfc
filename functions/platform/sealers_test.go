package platform

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store/dynamo"
)

// The two sealers of the credentials key reach the family environment each under its own
// encryption context, each only where its variable names the key (infra/stack sets
// SECRETS_KEY_ID for a grant on the key without a condition, CRM_SECRETS_KEY_ID for one under
// the CRM purpose): Env.Secrets asks KMS for data keys under the default purpose,
// Env.CRMSecrets under the CRM one, and a Lambda granted only the latter (crm, mcp) has no
// sealer of channel credentials at all.
func TestDepsCarryTheSealersUnderTheirContexts(t *testing.T) {
	t.Parallel()
	const key = "arn:aws:kms:us-east-1:123456789012:key/secrets"
	fake := awsfake.New(t, awsfake.KMS)
	fake.Handle("GenerateDataKey", func(json.RawMessage) (any, *awsfake.Error) {
		pt, edk := make([]byte, 32), make([]byte, 48)
		rand.Read(pt)
		rand.Read(edk)
		return map[string]any{"KeyId": key, "Plaintext": pt, "CiphertextBlob": edk}, nil
	})
	build := func(cfg AWSConfig) *family.Env {
		t.Helper()
		a, _ := awsAt(fake, cfg)
		st := dynamo.New(dynamodb.NewFromConfig(fake.Config()), "table") // never called
		d, err := a.deps(context.Background(), st, a.log, time.Now)
		require.NoError(t, err)
		d.Audit, d.CursorKey = noAudit{}, sdkKeyBytes(32)
		env, err := family.NewEnv(d)
		require.NoError(t, err)
		return env
	}
	// contextOfSeal seals with s and returns the encryption context of the data key it asked for.
	contextOfSeal := func(s secrets.Sealer) map[string]string {
		t.Helper()
		before := len(fake.Calls("GenerateDataKey"))
		_, err := s.Seal(context.Background(), []byte("token"), []byte("aad"))
		require.NoError(t, err)
		calls := fake.Calls("GenerateDataKey")
		require.Len(t, calls, before+1)
		var in struct {
			KeyId             string
			EncryptionContext map[string]string
		}
		require.NoError(t, json.Unmarshal(calls[before], &in))
		assert.Equal(t, key, in.KeyId)
		return in.EncryptionContext
	}

	both := build(AWSConfig{SecretsKeyID: key, CRMSecretsKeyID: key}) // the jobs Lambda
	require.NotNil(t, both.Secrets)
	require.NotNil(t, both.CRMSecrets)
	assert.Equal(t, map[string]string{"purpose": "botplatform-secrets"}, contextOfSeal(both.Secrets))
	assert.Equal(t, map[string]string{"purpose": "botplatform-crm-credentials"}, contextOfSeal(both.CRMSecrets))

	crmOnly := build(AWSConfig{CRMSecretsKeyID: key}) // the crm and MCP Lambdas
	assert.Nil(t, crmOnly.Secrets, "no sealer the Lambda's grant would refuse")
	assert.Equal(t, map[string]string{"purpose": "botplatform-crm-credentials"}, contextOfSeal(crmOnly.CRMSecrets))

	channelsOnly := build(AWSConfig{SecretsKeyID: key}) // channels, broadcasts, ...
	assert.Nil(t, channelsOnly.CRMSecrets)
	assert.Equal(t, map[string]string{"purpose": "botplatform-secrets"}, contextOfSeal(channelsOnly.Secrets))

	none := build(AWSConfig{})
	assert.Nil(t, none.Secrets)
	assert.Nil(t, none.CRMSecrets)
}

func TestAWSConfigFromEnvReadsTheCRMSecretsKey(t *testing.T) {
	t.Setenv("SECRETS_KEY_ID", "")
	t.Setenv(EnvCRMSecretsKeyID, "key-1")
	cfg := AWSConfigFromEnv()
	assert.Equal(t, "key-1", cfg.CRMSecretsKeyID)
	assert.Empty(t, cfg.SecretsKeyID)
}
