package stack

import (
	"strings"
	"testing"

	"github.com/botplatform/api/docs"
)

// doc builds a small OpenAPI document with a global bearer requirement; ops are
// "<path>: <method>: <extra yaml>" blocks.
func doc(paths string) []byte {
	return []byte(`openapi: 3.1.0
info: {title: t, version: "1"}
security:
  - bearerAuth: []
components:
  securitySchemes:
    bearerAuth: {type: http, scheme: bearer}
paths:
` + paths)
}

const healthz = `  /healthz:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /openapi.yaml:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /webhooks/telegram/{channelID}:
    post:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /webhooks/vk/{channelID}:
    post:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /webhooks/whatsapp:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
    post:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /p/{botID}/popups.js:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /p/{botID}/events:
    options:
      security: []
      x-family: public
      responses: {'204': {description: ok}}
    post:
      security: []
      x-family: public
      responses: {'202': {description: ok}}
  /e/t/o/{token}:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /e/t/c/{token}:
    get:
      security: []
      x-family: public
      responses: {'302': {description: ok}}
  /b/c/{token}:
    get:
      security: []
      x-family: public
      responses: {'302': {description: ok}}
  /u/{token}:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
    post:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /esp/{provider}/webhook:
    post:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /esp/{provider}/inbound:
    post:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /api/integrations/crm/{provider}/callback:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
  /api/meta/callback:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
`

func TestRoutesOfTheDocument(t *testing.T) {
	t.Parallel()
	routes, err := Routes(familyNames(), docs.Documents...)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]Route{}
	for _, r := range routes {
		byKey[r.Key()] = r
	}
	if r := byKey["PATCH /api/bots/{botID}"]; r.Family != "bots" || r.Public {
		t.Errorf("PATCH /api/bots/{botID}: %+v", r)
	}
	if r := byKey["GET /healthz"]; r.Family != "public" || !r.Public {
		t.Errorf("GET /healthz: %+v", r)
	}
	if r := byKey["POST /sdk/v1/events"]; r.Family != "sdk" || !r.Public {
		t.Errorf("POST /sdk/v1/events: %+v", r)
	}
}

func TestRoutesRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, paths string
		families    []string
		want        string
	}{
		{"a new public route", healthz + `  /api/x:
    get:
      security: []
      x-family: pats
      responses: {'200': {description: ok}}
`, []string{"public", "pats"}, "differ from the reviewed list"},
		{"a public route made private", `  /healthz:
    get:
      x-family: public
      responses: {'200': {description: ok}}
  /openapi.yaml:
    get:
      security: []
      x-family: public
      responses: {'200': {description: ok}}
`, []string{"public"}, "differ from the reviewed list"},
		{"no x-family", healthz + `  /api/x:
    get:
      responses: {'200': {description: ok}}
`, []string{"public"}, "no x-family"},
		{"an unknown family", healthz + `  /api/x:
    get:
      x-family: nope
      responses: {'200': {description: ok}}
`, []string{"public"}, `"nope" is not a family`},
		{"optional credentials", healthz + `  /api/x:
    get:
      security: [{}, {bearerAuth: []}]
      x-family: pats
      responses: {'200': {description: ok}}
`, []string{"public", "pats"}, "optional security"},
		{"a family without routes", healthz, []string{"public", "pats"}, `family "pats" serves no operation`},
		{"a method HTTP APIs lack", healthz + `  /api/x:
    trace:
      x-family: public
      responses: {'200': {description: ok}}
`, []string{"public"}, "cannot have method TRACE"},
		{"an SDK route behind the authorizer", strings.ReplaceAll(healthz, "/healthz:", "/healthz-old:") + `  /healthz:
    get:
      x-family: public
      responses: {'200': {description: ok}}
`, []string{"public"}, "differ from the reviewed list"},
	} {
		_, err := Routes(tt.families, doc(tt.paths), docs.SDKOpenAPI)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	// A route two documents define would reach one Lambda only.
	if _, err := Routes([]string{"public", "sdk"}, doc(healthz), docs.SDKOpenAPI, doc(healthz)); err == nil || !strings.Contains(err.Error(), "defined by two documents") {
		t.Errorf("a route of two documents: error %v", err)
	}
	// The SDK document's operations are documented with installation tokens yet routed
	// without the authorizer (x-gateway-public): the minimal pair of documents passes.
	if _, err := Routes([]string{"public", "sdk"}, doc(healthz), docs.SDKOpenAPI); err != nil {
		t.Errorf("the minimal documents: %v", err)
	}
	if _, err := Routes([]string{"public"}, doc(healthz)); err == nil || !strings.Contains(err.Error(), "differ from the reviewed list") {
		t.Errorf("without the SDK's routes: error %v", err)
	}
}

func TestAccessTableHasNoWildcards(t *testing.T) {
	t.Parallel()
	names, err := LambdaNames()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAccess(names); err != nil {
		t.Error(err)
	}
	if err := checkAccess(append(names, "newfamily")); err == nil || !strings.Contains(err.Error(), "newfamily") {
		t.Errorf("a Lambda without a row: %v", err)
	}
}
