// Package mcp serves the MCP server: POST /mcp, Streamable HTTP (stateless, JSON
// responses) on the official Go SDK, authenticated with the same PAT as the REST API. It
// serves the tools of every family composed on its Env (family.Env.Tools), each declared
// beside its family's routes with the same access (shared/mcptool), which runs every call:
// this package only speaks the protocol. docs/mcp.md says how to add a tool.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Implementation is how the server introduces itself to clients.
var Implementation = mcpsdk.Implementation{Name: "botplatform", Title: "Bot platform API", Version: "1.0.0"}

// instructions tell a model how the tools fit together.
const instructions = "Tools of the bot platform's API. Start with list_bots: every other tool acts on one of " +
	"your bots, named by its bot_id. Results are the JSON the REST API answers; lists are " +
	"{data, next_cursor}: send next_cursor back unchanged as cursor for the next page. A refused " +
	"call is a tool error whose content is the REST API's problem document (status, code, detail)."

// NewServer returns the SDK server of tools, each call run by the tool kernel with d.
func NewServer(tools []mcptool.Tool, d mcptool.Deps) (*mcpsdk.Server, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	// Capabilities set: no logging capability (the default one); tools are added below.
	s := mcpsdk.NewServer(&Implementation, &mcpsdk.ServerOptions{Instructions: instructions, Capabilities: &mcpsdk.ServerCapabilities{}})
	for _, t := range tools {
		schema, err := jsonschema.ForType(t.Args(), nil)
		if err != nil {
			return nil, fmt.Errorf("mcp: input schema of %s: %w", t.Name, err)
		}
		closedWorld := false
		s.AddTool(&mcpsdk.Tool{
			Name:        t.Name,
			Description: t.Summary(),
			InputSchema: schema,
			Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: !t.Mutates, OpenWorldHint: &closedWorld},
		}, handler(t, d))
	}
	return s, nil
}

// handler runs one tool's calls through the kernel and answers them as MCP results.
func handler(t mcptool.Tool, d mcptool.Deps) mcpsdk.ToolHandler {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		return result(ctx, t.Call(ctx, d, args), d), nil
	}
}

// result is a call's outcome as an MCP tool result: the JSON the REST route answers as
// structured content (and as text, for clients that read only text), or the REST problem
// document as a tool error.
func result(ctx context.Context, res mcptool.Result, d mcptool.Deps) *mcpsdk.CallToolResult {
	if res.Err == nil {
		b, err := marshalObject(res.Value)
		if err == nil {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
		}
		d.Log.ErrorContext(ctx, "tool result not encoded", "request_id", httpapi.RequestID(ctx), "error", err)
		res.Err = httpapi.AsError(err)
	}
	b, err := json.Marshal(res.Err.Problem(httpapi.RequestID(ctx)))
	if err != nil {
		b = []byte(`{"status":500,"code":"internal_error"}`)
	}
	return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// marshalObject encodes a tool's answer, which MCP requires to be a JSON object: nil (a
// route's 204) is {}.
func marshalObject(v any) ([]byte, error) {
	if v == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("mcp: a tool answered %T, not a JSON object", v)
	}
	return b, nil
}
