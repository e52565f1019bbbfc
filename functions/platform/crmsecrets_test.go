package platform

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	crmwiring "github.com/botplatform/api/functions/crm/wiring"
	metawiring "github.com/botplatform/api/functions/meta/wiring"
	"github.com/botplatform/api/shared/awsfake"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/store/dynamo"
)

const (
	hubSpotSecretParam    = "/botplatform/test/crm/hubspot-client-secret"
	salesforceSecretParam = "botplatform-test-crm-salesforce-client-secret" // a name without a hierarchy
)

// The plain variables the platform refuses beside a parameter's name are the ones the crm
// family reads locally, and each parameter's variable is that name with _PARAMETER.
func TestCRMClientSecretVariablesAreTheFamilys(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []parameterSecret{
		{crmapi.HubSpot, crmwiring.EnvHubSpotClientSecret + "_PARAMETER", crmwiring.EnvHubSpotClientSecret},
		{crmapi.Salesforce, crmwiring.EnvSalesforceClientSecret + "_PARAMETER", crmwiring.EnvSalesforceClientSecret},
		// The meta family's Facebook app secret travels with them (metawiring.AppSecretKey).
		{metawiring.AppSecretKey, metawiring.EnvAppSecret + "_PARAMETER", metawiring.EnvAppSecret},
	}, crmClientSecrets)
}

func TestCRMClientSecretsAreReadFromSSM(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		hubSpotSecretParam:    {Value: "hs-s3cret\n"},
		salesforceSecretParam: {Value: "sf-s3cret"},
	})
	a, logs := awsAt(fake, AWSConfig{CRMClientSecretParameters: map[string]string{
		crmapi.HubSpot: hubSpotSecretParam, crmapi.Salesforce: salesforceSecretParam}})
	got, err := a.CRMClientSecrets(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{crmapi.HubSpot: "hs-s3cret", crmapi.Salesforce: "sf-s3cret"}, got)

	calls := fake.Calls("GetParameter")
	require.Len(t, calls, 2, "each parameter is read once")
	for i, name := range []string{hubSpotSecretParam, salesforceSecretParam} {
		var body map[string]any
		require.NoError(t, json.Unmarshal(calls[i], &body))
		assert.Equal(t, map[string]any{"Name": name, "WithDecryption": true}, body)
	}
	assert.Contains(t, logs.String(), hubSpotSecretParam, "the cold start says where the secrets came from")
	assert.Contains(t, logs.String(), salesforceSecretParam)
	assert.NotContains(t, logs.String(), "hs-s3cret")
	assert.NotContains(t, logs.String(), "sf-s3cret")

	// One application configured, the other not: only its parameter is read.
	fake = awsfake.ParameterStore(t, map[string]awsfake.Parameter{salesforceSecretParam: {Value: "sf-s3cret"}})
	a, _ = awsAt(fake, AWSConfig{CRMClientSecretParameters: map[string]string{crmapi.Salesforce: salesforceSecretParam}})
	got, err = a.CRMClientSecrets(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{crmapi.Salesforce: "sf-s3cret"}, got)
	assert.Len(t, fake.Calls("GetParameter"), 1)
}

// Without a parameter named (every Lambda but crm, and crm when the stack names none) there
// is no secret and no call: the family answers 503 oauth_not_configured.
func TestCRMClientSecretsUnsetCallNothing(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, nil)
	a, _ := awsAt(fake, AWSConfig{})
	got, err := a.CRMClientSecrets(context.Background())
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Empty(t, fake.Calls("GetParameter"))
}

// A secret in the process environment beside its parameter's name is refused before any
// call: on AWS a secret is never a Lambda variable.
func TestCRMClientSecretsRefuseTheSecretAsAVariable(t *testing.T) {
	t.Setenv(crmwiring.EnvHubSpotClientSecret, "hs-in-the-environment")
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{hubSpotSecretParam: {Value: "hs-s3cret"}})
	a, _ := awsAt(fake, AWSConfig{CRMClientSecretParameters: map[string]string{crmapi.HubSpot: hubSpotSecretParam}})
	_, err := a.CRMClientSecrets(context.Background())
	require.ErrorContains(t, err, "both CRM_HUBSPOT_CLIENT_SECRET_PARAMETER and CRM_HUBSPOT_CLIENT_SECRET are set")
	assert.NotContains(t, err.Error(), "hs-in-the-environment")
	assert.Empty(t, fake.Calls("GetParameter"))
}

// The secrets reach the family environment (family.Env.CRMClientSecrets) the crm family is
// built on, and an unusable parameter refuses the environment.
func TestDepsCarryTheCRMClientSecrets(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		hubSpotSecretParam: {Value: "hs-s3cret"},
		"/blank":           {Value: "  "},
	})
	build := func(cfg AWSConfig) (*family.Env, error) {
		a, _ := awsAt(fake, cfg)
		st := dynamo.New(dynamodb.NewFromConfig(fake.Config()), "table") // never called
		d, err := a.deps(context.Background(), st, a.log, time.Now)
		if err != nil {
			return nil, err
		}
		d.Audit, d.CursorKey = noAudit{}, sdkKeyBytes(32)
		return family.NewEnv(d)
	}
	env, err := build(AWSConfig{CRMClientSecretParameters: map[string]string{crmapi.HubSpot: hubSpotSecretParam}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{crmapi.HubSpot: "hs-s3cret"}, env.CRMClientSecrets)

	env, err = build(AWSConfig{})
	require.NoError(t, err)
	assert.Nil(t, env.CRMClientSecrets, "not configured")

	_, err = build(AWSConfig{CRMClientSecretParameters: map[string]string{crmapi.HubSpot: "/blank"}})
	require.ErrorContains(t, err, "blank")
}

func TestAWSConfigFromEnvReadsTheCRMClientSecretParameters(t *testing.T) {
	t.Setenv(EnvCRMHubSpotClientSecretParameter, " "+hubSpotSecretParam+"\n")
	t.Setenv(EnvCRMSalesforceClientSecretParameter, "")
	assert.Equal(t, map[string]string{crmapi.HubSpot: hubSpotSecretParam}, AWSConfigFromEnv().CRMClientSecretParameters)
	t.Setenv(EnvCRMHubSpotClientSecretParameter, "")
	assert.Nil(t, AWSConfigFromEnv().CRMClientSecretParameters)
	t.Setenv(EnvCRMSalesforceClientSecretParameter, salesforceSecretParam)
	assert.Equal(t, map[string]string{crmapi.Salesforce: salesforceSecretParam}, AWSConfigFromEnv().CRMClientSecretParameters)
}
