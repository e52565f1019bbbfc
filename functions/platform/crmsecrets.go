package platform

import (
	"context"
	"maps"
	"os"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/ssm"

	crmapi "github.com/botplatform/api/shared/crm"
)

// The variables that name the SSM SecureString parameters holding the client secrets of the
// CRM family's OAuth applications on AWS (AWSConfig.CRMClientSecretParameters). infra/stack
// sets them only on the Lambdas granted ssm:GetParameter on those parameters (the crm
// Lambda; the MCP Lambda, whose CRM read tools refresh tokens; the jobs Lambda, whose CRM
// sync steps do), and only when the stack's configuration names them. Every Lambda reads
// what its variables name at cold start (AWS.deps): the variables, not the Lambda's name,
// decide.
const (
	EnvCRMHubSpotClientSecretParameter    = "CRM_HUBSPOT_CLIENT_SECRET_PARAMETER"
	EnvCRMSalesforceClientSecretParameter = "CRM_SALESFORCE_CLIENT_SECRET_PARAMETER"
	// EnvMetaAppSecretParameter names the parameter of the meta family's Facebook app secret,
	// handed over beside the CRM client secrets under the key "meta"
	// (functions/meta/wiring.AppSecretKey): an OAuth client secret too.
	EnvMetaAppSecretParameter = "META_APP_SECRET_PARAMETER"
)

// crmClientSecrets are the CRM family's OAuth applications (functions/crm/wiring.ConfigFromEnv).
var crmClientSecrets = []parameterSecret{
	{crmapi.HubSpot, EnvCRMHubSpotClientSecretParameter, "CRM_HUBSPOT_CLIENT_SECRET"},
	{crmapi.Salesforce, EnvCRMSalesforceClientSecretParameter, "CRM_SALESFORCE_CLIENT_SECRET"},
	{"meta", EnvMetaAppSecretParameter, "META_APP_SECRET"},
}

// crmClientSecretParametersFromEnv reads the parameters' names, by provider: nil when none is
// named (every Lambda but crm, mcp and jobs).
func crmClientSecretParametersFromEnv(getenv func(string) string) map[string]string {
	return secretParametersFromEnv(crmClientSecrets, getenv)
}

// CRMClientSecrets returns the client secrets of the CRM family's OAuth applications, by
// provider, each read once from the SSM parameter its variable names (GetParameter with
// decryption): nil, without a call, when none is named (the family then answers 503
// oauth_not_configured for those providers). A named parameter that is missing, unreadable,
// not a SecureString or blank fails the cold start, naming the parameter and never the value;
// so does the secret itself in the environment beside its parameter's name (on AWS a secret
// is never a Lambda variable).
func (a *AWS) CRMClientSecrets(ctx context.Context) (map[string]string, error) {
	names := a.cfg.CRMClientSecretParameters
	secrets, err := readCRMClientSecrets(ctx, func() parameterGetter { return ssm.NewFromConfig(a.aws) }, names, os.Getenv)
	if err != nil {
		return nil, err
	}
	if len(secrets) > 0 {
		var attrs []any
		for _, p := range slices.Sorted(maps.Keys(names)) {
			attrs = append(attrs, p+"_client_secret_parameter", names[p])
		}
		a.log.Info("CRM client secrets read from SSM", attrs...)
	}
	return secrets, nil
}

// readCRMClientSecrets reads the parameters names gives (by provider), in the order of
// crmClientSecrets (readParameterSecrets).
func readCRMClientSecrets(ctx context.Context, client func() parameterGetter, names map[string]string,
	getenv func(string) string) (map[string]string, error) {
	return readParameterSecrets(ctx, client, crmClientSecrets, names, getenv)
}
