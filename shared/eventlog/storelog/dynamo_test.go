package storelog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/store/dynamo"
)

// endpointEnv names the DynamoDB Local endpoint, as for the DynamoDB store's own tests:
// tests/emulators/dynamodb-test.sh starts the emulator and sets it. Without it the test
// skips, so that `go test ./...` needs nothing but Go.
const endpointEnv = "DYNAMODB_ENDPOINT"

func TestConformanceOnDynamoDBLocal(t *testing.T) {
	endpoint := os.Getenv(endpointEnv)
	if endpoint == "" {
		t.Skipf("%s is not set: run tests/emulators/dynamodb-test.sh (or make test-dynamodb) to test against DynamoDB Local", endpointEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		// DynamoDB Local checks that requests are signed, not by whom.
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	)
	require.NoError(t, err)
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true // DynamoDB Local sends no CRC with errors
	})
	table := fmt.Sprintf("eventlog-%016x", rand.Uint64())
	require.NoError(t, dynamo.CreateTable(ctx, client, table))
	l := New(dynamo.New(client, table))
	eventlogtest.Run(t, func(*testing.T) eventlog.Log { return l })
}
