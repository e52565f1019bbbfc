package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// SecretParameters name the SSM Parameter Store SecureString parameters that hold the
// providers' secrets on AWS. The operator creates them (aws ssm put-parameter --type
// SecureString); infra passes only their names, with ssm:GetParameter on exactly those
// parameters and kms:Decrypt through SSM for them.
type SecretParameters struct {
	WhatsAppAppSecret   string // WHATSAPP_APP_SECRET_PARAMETER
	WhatsAppVerifyToken string // WHATSAPP_VERIFY_TOKEN_PARAMETER
}

// parameterGetter is the one SSM operation the platform uses (*ssm.Client).
type parameterGetter interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Providers returns this container's provider configuration: Providers from the environment,
// with each secret whose parameter the environment names read from SSM once (GetParameter
// with decryption), validated. A named parameter that is missing, unreadable, not a
// SecureString or empty is an error: the cold start fails with a message naming the
// parameter and the variable (never the value), rather than the container serving
// WhatsApp webhooks with 401 until someone reads the logs.
func (a *AWS) Providers(ctx context.Context) (Providers, error) {
	p, err := readSecretParameters(ctx, func() parameterGetter { return ssm.NewFromConfig(a.aws) }, a.cfg.Providers, a.cfg.SecretParameters)
	if err != nil {
		return Providers{}, err
	}
	if err := p.Validate(); err != nil {
		return Providers{}, fmt.Errorf("platform: %w", err)
	}
	if n := a.cfg.SecretParameters; n != (SecretParameters{}) {
		a.log.Info("provider secrets read from SSM", "whatsapp_app_secret_parameter", n.WhatsAppAppSecret,
			"whatsapp_verify_token_parameter", n.WhatsAppVerifyToken)
	}
	return p, nil
}

// readSecretParameters fills p's secrets from the named parameters; client is made only
// when a parameter is named.
func readSecretParameters(ctx context.Context, client func() parameterGetter, p Providers, names SecretParameters) (Providers, error) {
	secrets := []struct {
		name, nameVar, plainVar string
		into                    *string
	}{
		{names.WhatsAppAppSecret, EnvWhatsAppAppSecretParameter, EnvWhatsAppAppSecret, &p.WhatsAppAppSecret},
		{names.WhatsAppVerifyToken, EnvWhatsAppVerifyTokenParameter, EnvWhatsAppVerifyToken, &p.WhatsAppVerifyToken},
	}
	var c parameterGetter
	for _, s := range secrets {
		if s.name == "" {
			continue
		}
		if *s.into != "" {
			return Providers{}, fmt.Errorf("platform: both %s and %s are set: set only the parameter's name", s.nameVar, s.plainVar)
		}
		if c == nil {
			c = client()
		}
		v, err := readSecureString(ctx, c, s.name, s.nameVar)
		if err != nil {
			return Providers{}, err
		}
		*s.into = v
	}
	return p, nil
}

// readSecureString reads one SecureString parameter's decrypted value.
func readSecureString(ctx context.Context, c parameterGetter, name, nameVar string) (string, error) {
	out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	var notFound *ssmtypes.ParameterNotFound
	switch {
	case errors.As(err, &notFound):
		return "", fmt.Errorf("platform: %s names the SSM parameter %q, which does not exist in this account and region: "+
			"create it with `aws ssm put-parameter --type SecureString --name %s --value ...` (see the README, Deploy to AWS)", nameVar, name, name)
	case err != nil:
		return "", fmt.Errorf("platform: read the SSM parameter %q (%s; the role needs ssm:GetParameter on it and kms:Decrypt on its key through SSM): %w", name, nameVar, err)
	case out.Parameter == nil || out.Parameter.Value == nil:
		return "", fmt.Errorf("platform: the SSM parameter %q (%s) came back without a value", name, nameVar)
	case out.Parameter.Type != ssmtypes.ParameterTypeSecureString:
		return "", fmt.Errorf("platform: the SSM parameter %q (%s) is a %s parameter: a secret must be a SecureString (recreate it with --type SecureString)", name, nameVar, out.Parameter.Type)
	}
	v := strings.TrimSpace(*out.Parameter.Value)
	if v == "" {
		return "", fmt.Errorf("platform: the SSM parameter %q (%s) is blank", name, nameVar)
	}
	return v, nil
}
