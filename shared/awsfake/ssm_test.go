package awsfake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/awsfake"
)

// The SDK's own SSM client gets through the fake's checks (protocol, target, signature) and
// reads back what Parameter Store would answer.
func TestParameterStoreSpeaksSSM(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		"/app/secret": {Value: "s3cret"},
		"/app/plain":  {Type: "String", Value: "hello"},
	})
	c := ssm.NewFromConfig(fake.Config())
	ctx := context.Background()

	out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/secret"), WithDecryption: aws.Bool(true)})
	require.NoError(t, err)
	assert.Equal(t, "s3cret", aws.ToString(out.Parameter.Value))
	assert.Equal(t, ssmtypes.ParameterTypeSecureString, out.Parameter.Type)
	assert.Equal(t, "arn:aws:ssm:us-east-1:123456789012:parameter/app/secret", aws.ToString(out.Parameter.ARN))

	out, err = c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/secret")})
	require.NoError(t, err)
	assert.NotContains(t, aws.ToString(out.Parameter.Value), "s3cret", "no plaintext without WithDecryption")

	out, err = c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/plain")})
	require.NoError(t, err)
	assert.Equal(t, ssmtypes.ParameterTypeString, out.Parameter.Type)

	_, err = c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/app/none"), WithDecryption: aws.Bool(true)})
	var nf *ssmtypes.ParameterNotFound
	assert.True(t, errors.As(err, &nf), "a missing parameter is ParameterNotFound: %v", err)

	assert.Len(t, fake.Calls("GetParameter"), 4)
}
