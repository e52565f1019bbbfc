package mcp_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/mcp"
	"github.com/botplatform/api/shared/apigw"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
)

// Behind API Gateway: the Lambda adapter's request, the API's own Host, the principal from
// the authorizer's context. The SDK answers it as it answers the local process.
func TestBehindTheLambdaAdapter(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{Tenancy: func(*family.Env) httpapi.BotLoader { return bots{} }})
	mux, err := family.Compose(env, mcp.Family(), things()).Mux(apigw.Authenticator(time.Now))
	require.NoError(t, err)
	handle := apigw.Handler(mux)
	allow, err := apigw.Allow(principals["full"])
	require.NoError(t, err)

	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"bot_id":"` + myBot + `","text":"from lambda"}}}`
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /mcp", RawPath: "/mcp", Body: call,
		Headers: map[string]string{"content-type": "application/json", "host": "abc123.execute-api.eu-west-1.amazonaws.com",
			"accept": "application/json, text/event-stream"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID:  "gw-req-1",
			DomainName: "abc123.execute-api.eu-west-1.amazonaws.com",
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/mcp"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: allow.Context},
		},
	}
	res, err := handle(t.Context(), ev)
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode, res.Body)
	var rpc struct {
		ID     int `json:"id"`
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &rpc), res.Body)
	assert.Equal(t, 7, rpc.ID)
	assert.False(t, rpc.Result.IsError)
	assert.Equal(t, map[string]any{"bot": myBot, "text": "from lambda"}, rpc.Result.StructuredContent)

	// Without the authorizer's context the request is unauthenticated: it fails closed.
	ev.RequestContext.Authorizer = nil
	res, err = handle(t.Context(), ev)
	require.NoError(t, err)
	assert.Equal(t, 401, res.StatusCode)
}
