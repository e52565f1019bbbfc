package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/tests/lambdaruntime"
)

// sample reads events/samples/<name> with {{KEY}} placeholders replaced.
func sample(t *testing.T, name string, vars map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "events", "samples", name))
	require.NoError(t, err)
	for k, v := range vars {
		b = bytes.ReplaceAll(b, []byte("{{"+k+"}}"), []byte(v))
	}
	require.NotContains(t, string(b), "{{", "unfilled placeholder in %s", name)
	return b
}

// bootLambda builds functions/<name>/lambda for this machine and starts it against a fake
// Lambda Runtime API.
func bootLambda(t *testing.T, name string, env ...string) (*lambdaruntime.Runtime, *lambdaruntime.Process) {
	t.Helper()
	rt, err := lambdaruntime.Start()
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	bin, err := lambdaruntime.Build("..", t.TempDir(), name)
	require.NoError(t, err)
	p, err := rt.Launch(bin, env...)
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	return rt, p
}

func invokeHTTP(t *testing.T, rt *lambdaruntime.Runtime, payload []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := rt.Invoke(ctx, payload)
	require.NoError(t, err)
	require.False(t, res.Error, "function error: %s", res.Payload)
	var out events.APIGatewayV2HTTPResponse
	require.NoError(t, json.Unmarshal(res.Payload, &out), "%s", res.Payload)
	return out
}

// The public Lambda boots from its real bootstrap binary and answers API Gateway events.
func TestPublicLambdaBoots(t *testing.T) {
	t.Parallel()
	rt, p := bootLambda(t, "public")

	res := invokeHTTP(t, rt, sample(t, "apigw-get-healthz.json", nil))
	assert.Equal(t, 200, res.StatusCode)
	assert.JSONEq(t, `{"status":"ok"}`, res.Body)
	assert.NotEmpty(t, res.Headers["X-Request-Id"])

	res = invokeHTTP(t, rt, sample(t, "apigw-get-openapi.json", nil))
	assert.Equal(t, 200, res.StatusCode)
	assert.Equal(t, "application/yaml", res.Headers["Content-Type"])
	assert.Equal(t, string(docs.OpenAPI), res.Body)

	// A route of another family never reaches the public Lambda's handlers: 404, not a leak.
	other := bytes.ReplaceAll(sample(t, "apigw-get-healthz.json", nil), []byte("/healthz"), []byte("/api/bots"))
	res = invokeHTTP(t, rt, other)
	assert.Equal(t, 404, res.StatusCode)
	assert.Equal(t, "application/problem+json", res.Headers["Content-Type"])

	exited, _ := p.Exited()
	assert.False(t, exited, "the process serves invocation after invocation")
	assert.False(t, strings.Contains(p.Logs(), "panic"), p.Logs())
	assert.Zero(t, rt.InitErrors.Load())
}
