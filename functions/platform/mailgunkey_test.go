package platform

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
)

const mailgunKeyParam = "/botplatform/prod/mailgun-signing-key"

// The Mailgun signing key is read once from its SSM parameter, with decryption; the cold
// start says where it came from, never what it is.
func TestMailgunSigningKeyIsReadFromSSM(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{mailgunKeyParam: {Value: "key-mailgun-s3cret\n"}})
	a, logs := awsAt(fake, AWSConfig{MailgunSigningKeyParameter: mailgunKeyParam})
	got, err := a.MailgunSigningKey(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "key-mailgun-s3cret", got)
	calls := fake.Calls("GetParameter")
	require.Len(t, calls, 1, "read once")
	var body map[string]any
	require.NoError(t, json.Unmarshal(calls[0], &body))
	assert.Equal(t, map[string]any{"Name": mailgunKeyParam, "WithDecryption": true}, body)
	assert.Contains(t, logs.String(), mailgunKeyParam)
	assert.NotContains(t, logs.String(), "s3cret")
}

// Without the variable there is no key and no call; an unusable parameter, or the key
// itself beside its parameter's name, fails the cold start naming the parameter, never the
// value.
func TestMailgunSigningKeyUnsetOrUnusable(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		"/plain": {Type: "String", Value: "key-plain-s3cret"},
		"/blank": {Value: " \n"},
		"/good":  {Value: "key-good-s3cret"},
	})
	a, _ := awsAt(fake, AWSConfig{})
	key, err := a.MailgunSigningKey(context.Background())
	require.NoError(t, err)
	assert.Empty(t, key)
	assert.Empty(t, fake.Calls("GetParameter"))

	for _, tt := range []struct{ param, want string }{
		{"/plain", "SecureString"},
		{"/blank", "blank"},
		{"/missing", "does not exist"},
	} {
		a, logs := awsAt(fake, AWSConfig{MailgunSigningKeyParameter: tt.param})
		_, err := a.MailgunSigningKey(context.Background())
		require.Error(t, err, tt.param)
		assert.Contains(t, err.Error(), tt.want, tt.param)
		assert.Contains(t, err.Error(), EnvMailgunSigningKeyParameter, tt.param)
		assert.NotContains(t, err.Error(), "s3cret", tt.param)
		assert.NotContains(t, logs.String(), "s3cret", tt.param)
	}

	_, err = readMailgunSigningKey(context.Background(), func() parameterGetter { t.Fatal("no call"); return nil }, "/good",
		func(v string) string {
			if v == EnvMailgunSigningKey {
				return "key-in-the-environment"
			}
			return ""
		})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set only the parameter's name")
	assert.NotContains(t, err.Error(), "key-in-the-environment")
}
