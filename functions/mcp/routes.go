package mcp

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jsonguard"
)

// Path is the MCP endpoint.
const Path = "/mcp"

// Handler serves the MCP endpoint with an SDK server.
type Handler struct {
	sdk http.Handler
}

// NewHandler returns the endpoint's handler over s: Streamable HTTP, stateless (each POST
// stands alone, so any Lambda instance can answer it) with JSON responses (no event
// stream, which API Gateway would buffer anyway).
//
// The SDK's DNS rebinding protection (a non-localhost Host on a loopback connection is
// refused) is off: it guards servers that trust whoever can reach them, and this one trusts
// no request without a PAT, which a page that rebinds a name to 127.0.0.1 cannot send. It
// would also refuse the local process behind a reverse proxy.
func NewHandler(s *mcpsdk.Server) *Handler {
	return &Handler{sdk: mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, &mcpsdk.StreamableHTTPOptions{
		Stateless:                  true,
		JSONResponse:               true,
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        httpapi.MaxBodyBytes,
	})}
}

// Routes registers POST /mcp. Its access is per call (httpapi.PerCall): the kernel
// authenticates the PAT, and each tool checks its own scope, rights and features and audits
// its own mutations. GET and DELETE, which a stateful server would answer, are not routed:
// a stateless server has no stream or session to open or end (405 with Allow: POST).
func Routes(mux *httpapi.Mux, h *Handler) {
	mux.Handle("POST "+Path, httpapi.PerCall(), h.serve)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) error {
	// Bound the body as every route does, and refuse nesting and encodings the platform
	// refuses everywhere before the SDK's decoder sees them.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return httpapi.Errorf(httpapi.KindTooLarge, "body_too_large", "request body exceeds %d bytes", httpapi.MaxBodyBytes)
	case err != nil:
		return httpapi.E(httpapi.KindInvalid, "invalid_body", "the request body could not be read").Wrap(err)
	}
	var ge *jsonguard.Error
	if errors.As(jsonguard.Check(body), &ge) {
		e := httpapi.E(httpapi.KindInvalid, "invalid_body", "the body is refused: "+ge.Error())
		if ge.Kind == jsonguard.TooDeep {
			e = e.With("max_depth", jsonguard.MaxDepth)
		}
		return e
	}
	// One message per request: batches (dropped from the protocol in 2025-06-18, still taken
	// by the SDK for older versions) would let one request of 1 MiB run thousands of calls.
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return httpapi.E(httpapi.KindInvalid, "invalid_mcp_request", "JSON-RPC batches are not accepted: send one message per request")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	// No Accept header accepts anything (RFC 9110): what the transport requires a client to
	// list (JSON and an event stream) is then given.
	if len(r.Header.Values("Accept")) == 0 {
		r.Header.Set("Accept", "application/json, text/event-stream")
	}
	cw := &refusals{ResponseWriter: w}
	h.sdk.ServeHTTP(cw, r)
	if cw.status != 0 {
		return refusal(cw.status, cw.text.String())
	}
	return nil
}

// refusals passes the SDK's answers through, except its plain-text refusals (http.Error),
// which it keeps so that the kernel answers them as every route does: problem+json.
type refusals struct {
	http.ResponseWriter
	status int          // a refusal's status, 0 for none
	text   bytes.Buffer // its message (the first 512 bytes)
	wrote  bool
}

func (c *refusals) WriteHeader(code int) {
	if c.wrote || c.status != 0 {
		return
	}
	if code >= 400 && strings.HasPrefix(c.Header().Get("Content-Type"), "text/plain") {
		c.status = code
		c.Header().Del("Content-Type")
		c.Header().Del("X-Content-Type-Options")
		return
	}
	c.wrote = true
	c.ResponseWriter.WriteHeader(code)
}

func (c *refusals) Write(b []byte) (int, error) {
	if !c.wrote && c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.status != 0 {
		c.text.Write(b[:min(len(b), max(0, 512-c.text.Len()))])
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets the kernel see what reached the client, and http.ResponseController flush.
func (c *refusals) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// refusal is the problem for a transport-level refusal of the SDK's.
func refusal(status int, text string) error {
	detail := strings.TrimSpace(text)
	if detail == "" {
		detail = http.StatusText(status)
	}
	switch status {
	case http.StatusRequestEntityTooLarge:
		return httpapi.Errorf(httpapi.KindTooLarge, "body_too_large", "request body exceeds %d bytes", httpapi.MaxBodyBytes)
	case http.StatusUnsupportedMediaType:
		return httpapi.E(httpapi.KindUnsupportedMediaType, "unsupported_media_type", "request bodies must be application/json")
	case http.StatusMethodNotAllowed:
		return httpapi.E(httpapi.KindMethodNotAllowed, "method_not_allowed", detail)
	case http.StatusNotFound:
		return httpapi.E(httpapi.KindNotFound, "not_found", detail)
	}
	if status >= 500 {
		return httpapi.AsError(errors.New("mcp: the SDK failed: " + detail))
	}
	return httpapi.E(httpapi.KindInvalid, "invalid_mcp_request", detail)
}
