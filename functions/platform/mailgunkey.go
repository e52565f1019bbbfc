package platform

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// EnvMailgunSigningKeyParameter names the SSM SecureString parameter that holds the Mailgun
// account's HTTP webhook signing key on AWS (AWSConfig.MailgunSigningKeyParameter).
// infra/stack sets it only on the Lambda granted ssm:GetParameter on that parameter
// (emailevents, which serves POST /esp/mailgun/webhook), and only when the stack's
// configuration names one. Locally the key is the variable EnvMailgunSigningKey itself.
const EnvMailgunSigningKeyParameter = "MAILGUN_SIGNING_KEY_PARAMETER"

// EnvMailgunSigningKey is the signing key itself, for the local process; on AWS a secret is
// never a Lambda variable.
const EnvMailgunSigningKey = "MAILGUN_SIGNING_KEY"

// MailgunSigningKey returns the Mailgun webhook signing key, read once from the SSM
// parameter MAILGUN_SIGNING_KEY_PARAMETER names (GetParameter with decryption): "", without
// a call, when the variable is unset (every Mailgun delivery is then refused). A named
// parameter that is missing, unreadable, not a SecureString or blank fails the cold start,
// naming the parameter and never the value; so does the key itself in the environment
// beside its parameter's name.
func (a *AWS) MailgunSigningKey(ctx context.Context) (string, error) {
	key, err := readMailgunSigningKey(ctx, func() parameterGetter { return ssm.NewFromConfig(a.aws) },
		a.cfg.MailgunSigningKeyParameter, os.Getenv)
	if err != nil {
		return "", err
	}
	if key != "" {
		a.log.Info("Mailgun signing key read from SSM", "mailgun_signing_key_parameter", a.cfg.MailgunSigningKeyParameter)
	}
	return key, nil
}

// readMailgunSigningKey reads the parameter called name; client is made only when name is
// set.
func readMailgunSigningKey(ctx context.Context, client func() parameterGetter, name string, getenv func(string) string) (string, error) {
	if name == "" {
		return "", nil
	}
	if getenv(EnvMailgunSigningKey) != "" {
		return "", fmt.Errorf("platform: both %s and %s are set: set only the parameter's name", EnvMailgunSigningKeyParameter, EnvMailgunSigningKey)
	}
	return readSecureString(ctx, client(), name, EnvMailgunSigningKeyParameter)
}
