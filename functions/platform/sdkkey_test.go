package platform

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/store/dynamo"
)

const sdkKeyParam = "/botplatform/test/sdk-key"

// sdkKeyBytes are n distinct bytes: a key whose every byte the decoding must keep.
func sdkKeyBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*37 + 11)
	}
	return b
}

// openssl is the value `openssl rand -base64 n` prints for key: standard base64 in lines of
// 64 characters, with a final newline.
func openssl(key []byte) string {
	enc := base64.StdEncoding.EncodeToString(key)
	var lines []string
	for len(enc) > 64 {
		lines, enc = append(lines, enc[:64]), enc[64:]
	}
	return strings.Join(append(lines, enc), "\n") + "\n"
}

func TestSDKKeyIsReadFromSSM(t *testing.T) {
	t.Parallel()
	for _, n := range []int{32, 64} { // 64 bytes: openssl breaks the base64 into two lines
		key := sdkKeyBytes(n)
		value := openssl(key)
		fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{sdkKeyParam: {Value: value}})
		a, logs := awsAt(fake, AWSConfig{SDKKeyParameter: sdkKeyParam})
		got, err := a.SDKKey(context.Background())
		require.NoError(t, err, n)
		assert.Equal(t, key, got, n)

		calls := fake.Calls("GetParameter")
		require.Len(t, calls, 1, "read once")
		var body map[string]any
		require.NoError(t, json.Unmarshal(calls[0], &body))
		assert.Equal(t, map[string]any{"Name": sdkKeyParam, "WithDecryption": true}, body)
		assert.Contains(t, logs.String(), sdkKeyParam, "the cold start says where the key came from")
		assert.NotContains(t, logs.String(), strings.TrimSpace(strings.Split(value, "\n")[0]))
	}
}

// Without SDK_KEY_PARAMETER (every Lambda but customersdk and sdk, and those two when the
// stack names no parameter) there is no key and no call: the families answer 503
// sdk_not_configured.
func TestSDKKeyUnsetCallsNothing(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, nil)
	a, _ := awsAt(fake, AWSConfig{})
	key, err := a.SDKKey(context.Background())
	require.NoError(t, err)
	assert.Nil(t, key)
	assert.Empty(t, fake.Calls("GetParameter"))
}

// Every way the parameter can be unusable fails the cold start with a message that names the
// parameter and its variable, never the value: a weak or garbled key is not run with.
func TestSDKKeyRefusesUnusableParameters(t *testing.T) {
	t.Parallel()
	short := base64.StdEncoding.EncodeToString(sdkKeyBytes(31))
	urlSafe := base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 24)) // "-" and "_"
	unpadded := base64.RawStdEncoding.EncodeToString(sdkKeyBytes(32))
	plain := base64.StdEncoding.EncodeToString(sdkKeyBytes(40))
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		"/short":    {Value: short},
		"/garbled":  {Value: "not base64 at all!"},
		"/urlsafe":  {Value: urlSafe},
		"/unpadded": {Value: unpadded},
		"/blank":    {Value: " \n "},
		"/plain":    {Type: "String", Value: plain},
	})
	for _, tt := range []struct {
		name, param string
		wants       []string
	}{
		{"31 bytes", "/short", []string{"decodes to 31 bytes", "at least 32"}},
		{"not base64", "/garbled", []string{"not standard base64"}},
		{"URL-safe alphabet", "/urlsafe", []string{"not standard base64"}},
		{"no padding", "/unpadded", []string{"not standard base64"}},
		{"blank", "/blank", []string{"blank"}},
		{"not a SecureString", "/plain", []string{"String parameter", "SecureString"}},
		{"missing", "/botplatform/prod/none", []string{"does not exist", "aws ssm put-parameter --type SecureString --name /botplatform/prod/none"}},
	} {
		a, logs := awsAt(fake, AWSConfig{SDKKeyParameter: tt.param})
		key, err := a.SDKKey(context.Background())
		require.Error(t, err, tt.name)
		assert.Nil(t, key, tt.name)
		for _, w := range append(tt.wants, `"`+tt.param+`"`, EnvSDKKeyParameter) {
			assert.Contains(t, err.Error(), w, tt.name)
		}
		for _, v := range []string{short, urlSafe, unpadded, plain} {
			assert.NotContains(t, err.Error(), v, tt.name)
			assert.NotContains(t, logs.String(), v, tt.name)
		}
	}
}

// The key reaches the family environment (family.Env.SDKKey) the families are built on, and
// a refused key refuses the environment.
func TestDepsCarryTheSDKKey(t *testing.T) {
	t.Parallel()
	key := sdkKeyBytes(32)
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		sdkKeyParam: {Value: openssl(key)},
		"/short":    {Value: base64.StdEncoding.EncodeToString(sdkKeyBytes(16))},
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
	env, err := build(AWSConfig{SDKKeyParameter: sdkKeyParam})
	require.NoError(t, err)
	assert.Equal(t, key, env.SDKKey)

	env, err = build(AWSConfig{})
	require.NoError(t, err)
	assert.Nil(t, env.SDKKey, "not configured")

	_, err = build(AWSConfig{SDKKeyParameter: "/short"})
	require.ErrorContains(t, err, "decodes to 16 bytes")
}

func TestAWSConfigFromEnvReadsTheSDKKeyParameter(t *testing.T) {
	t.Setenv(EnvSDKKeyParameter, " "+sdkKeyParam+"\n")
	assert.Equal(t, sdkKeyParam, AWSConfigFromEnv().SDKKeyParameter)
	t.Setenv(EnvSDKKeyParameter, "")
	assert.Empty(t, AWSConfigFromEnv().SDKKeyParameter)
}
