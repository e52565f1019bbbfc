package platform

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// EnvSDKKeyParameter names the SSM SecureString parameter that holds the customer SDK's
// project-key secret on AWS (AWSConfig.SDKKeyParameter). infra/stack sets it only on the
// Lambdas granted ssm:GetParameter on that parameter (customersdk and sdk), and only when
// the stack's configuration names one.
const EnvSDKKeyParameter = "SDK_KEY_PARAMETER"

// MinSDKKeyBytes is the least number of decoded bytes the project-key secret may have: the
// HMAC-SHA-256 key project keys are signed with (family.Deps.SDKKey).
const MinSDKKeyBytes = 32

// SDKKey returns the customer SDK's project-key secret, read once from the SSM parameter
// SDK_KEY_PARAMETER names (GetParameter with decryption) and decoded: nil, without a call,
// when the variable is unset (the families then answer 503 sdk_not_configured). A named
// parameter that is missing, unreadable, not a SecureString, not base64 or shorter than
// MinSDKKeyBytes once decoded fails the cold start, naming the parameter and never the
// value: a weak key would sign project keys that anyone could forge.
func (a *AWS) SDKKey(ctx context.Context) ([]byte, error) {
	key, err := readSDKKey(ctx, func() parameterGetter { return ssm.NewFromConfig(a.aws) }, a.cfg.SDKKeyParameter)
	if err != nil {
		return nil, err
	}
	if key != nil {
		a.log.Info("customer SDK key read from SSM", "sdk_key_parameter", a.cfg.SDKKeyParameter)
	}
	return key, nil
}

// readSDKKey reads and decodes the parameter called name; client is made only when name is
// set.
func readSDKKey(ctx context.Context, client func() parameterGetter, name string) ([]byte, error) {
	if name == "" {
		return nil, nil
	}
	v, err := readSecureString(ctx, client(), name, EnvSDKKeyParameter)
	if err != nil {
		return nil, err
	}
	return decodeSDKKey(v, name)
}

// decodeSDKKey decodes the parameter's value: standard base64 with padding (RFC 4648
// section 4), as `openssl rand -base64 32` prints it. Whitespace is ignored, since openssl
// breaks longer output into lines. The errors name the parameter, never the value.
func decodeSDKKey(value, name string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(value), ""))
	if err != nil {
		return nil, fmt.Errorf("platform: the SSM parameter %q (%s) is not standard base64: "+
			"store at least %d random bytes encoded as `openssl rand -base64 32` prints them", name, EnvSDKKeyParameter, MinSDKKeyBytes)
	}
	if len(key) < MinSDKKeyBytes {
		return nil, fmt.Errorf("platform: the SSM parameter %q (%s) decodes to %d bytes: the customer SDK's project-key secret "+
			"must be at least %d random bytes (`openssl rand -base64 32`)", name, EnvSDKKeyParameter, len(key), MinSDKKeyBytes)
	}
	return key, nil
}
