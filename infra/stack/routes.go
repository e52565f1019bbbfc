package stack

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Route is one operation of the OpenAPI document as the HTTP API serves it.
type Route struct {
	Method string // upper case, as in the route key
	Path   string // with {name} parameters, which HTTP API routes share with OpenAPI
	Family string // x-family: the family whose Lambda serves it
	Public bool   // security: [] or x-gateway-public: true — no authorizer
}

// Key is the HTTP API route key, "METHOD /path".
func (r Route) Key() string { return r.Method + " " + r.Path }

// PublicRoutes are the routes that take no credentials. Making a route public is a reviewed
// change to this list as well as to the OpenAPI document: synthesis fails when they differ.
func PublicRoutes() []string {
	return []string{
		"GET /healthz", "GET /openapi.yaml",
		// The providers' webhooks, each authenticated by its provider's own mechanism
		// (functions/webhooks, docs/webhooks.md).
		"GET /webhooks/whatsapp", "POST /webhooks/telegram/{channelID}", "POST /webhooks/vk/{channelID}", "POST /webhooks/whatsapp",
		// What websites load and post from visitors' browsers: the popup script, and the
		// events it sends, held to the origins the bot's popups allow and rate limited per
		// origin (functions/popups, docs/popups.md).
		"GET /p/{botID}/popups.js", "OPTIONS /p/{botID}/events", "POST /p/{botID}/events",
		// What sent emails link to (signed tokens in the path: functions/emailevents) and
		// what email providers call, each verified by its provider's scheme (SNS signatures,
		// Mailgun's HMAC; a shared secret for local inbound mail).
		"GET /e/t/o/{token}", "GET /e/t/c/{token}", "GET /u/{token}", "POST /u/{token}",
		// The tracked link buttons of sent broadcasts (signed tokens: functions/broadcasts).
		"GET /b/c/{token}",
		"POST /esp/{provider}/webhook", "POST /esp/{provider}/inbound",
		// The customer SDK's device surface (docs/sdk-openapi.yaml): registration takes the
		// project key, every other call an installation token, both checked by the sdk
		// family itself since the authorizer knows PATs and bot tokens only.
		// Browsers' CORS preflights are answered for any origin; the call itself is held to
		// the project's web origins.
		"POST /sdk/v1/installations", "POST /sdk/v1/identify", "POST /sdk/v1/push-tokens",
		"POST /sdk/v1/receipts", "POST /sdk/v1/events", "GET /sdk/v1/web-push/config",
		"OPTIONS /sdk/v1/installations", "OPTIONS /sdk/v1/identify", "OPTIONS /sdk/v1/push-tokens",
		"OPTIONS /sdk/v1/receipts", "OPTIONS /sdk/v1/events", "OPTIONS /sdk/v1/web-push/config",
		"GET /sdk/v1/sdk.js", "GET /sdk/v1/sw.js", "GET /sdk/openapi.yaml",
		// The OAuth providers' redirect after a CRM connection's consent screen: no token,
		// only the single-use, 5-minute state a start issued authenticates it
		// (functions/crm, docs/crm.md).
		"GET /api/integrations/crm/{provider}/callback",
		// The Facebook Login dialog's redirect after a Meta connection's consent: the same,
		// authenticated by the start's single-use, 5-minute state (functions/meta,
		// docs/meta.md).
		"GET /api/meta/callback",
	}
}

// routeMethods are the methods an HTTP API route can have (besides ANY, which the documents
// never use).
var routeMethods = []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}

// Routes returns every operation of the OpenAPI documents, sorted by route key. It
// reports every problem at once: an operation without a known x-family, a family that
// serves nothing, a route two documents both define, a security requirement an HTTP API
// cannot express, a public set other than PublicRoutes.
func Routes(families []string, documents ...[]byte) ([]Route, error) {
	var (
		routes   []Route
		problems []error
		served   = map[string]bool{}
		seen     = map[string]bool{}
	)
	for _, doc := range documents {
		d, err := openapi3.NewLoader().LoadFromData(doc)
		if err != nil {
			return nil, fmt.Errorf("openapi: %w", err)
		}
		for path, item := range d.Paths.Map() {
			for method, op := range item.Operations() {
				r, errs := route(d, path, method, op, families)
				problems = append(problems, errs...)
				if seen[r.Key()] {
					problems = append(problems, fmt.Errorf("%s: defined by two documents", r.Key()))
				}
				seen[r.Key()] = true
				served[r.Family] = true
				routes = append(routes, r)
			}
		}
	}
	for _, f := range families {
		if !served[f] {
			problems = append(problems, fmt.Errorf("family %q serves no operation of the document", f))
		}
	}
	slices.SortFunc(routes, func(a, b Route) int { return strings.Compare(a.Key(), b.Key()) })

	var public []string
	for _, r := range routes {
		if r.Public {
			public = append(public, r.Key())
		}
	}
	want := slices.Sorted(slices.Values(PublicRoutes()))
	if !slices.Equal(public, want) {
		problems = append(problems, fmt.Errorf("the document's public routes %q differ from the reviewed list %q (stack.PublicRoutes)", public, want))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("openapi: %w", errors.Join(problems...))
	}
	return routes, nil
}

// route reads one operation of document d: its route, and what keeps it from being one.
func route(d *openapi3.T, path, method string, op *openapi3.Operation, families []string) (Route, []error) {
	var problems []error
	r := Route{Method: strings.ToUpper(method), Path: path}
	if !slices.Contains(routeMethods, r.Method) {
		problems = append(problems, fmt.Errorf("%s: an HTTP API route cannot have method %s", r.Key(), r.Method))
	}
	r.Family, _ = op.Extensions["x-family"].(string)
	switch {
	case r.Family == "":
		problems = append(problems, fmt.Errorf("%s: no x-family", r.Key()))
	case !slices.Contains(families, r.Family):
		problems = append(problems, fmt.Errorf("%s: x-family %q is not a family of families.All()", r.Key(), r.Family))
	}
	security := d.Security
	if op.Security != nil {
		security = *op.Security
	}
	// x-gateway-public marks an operation whose family checks its own credentials (the
	// SDK's installation tokens): documented with them, routed without the authorizer.
	gatewayPublic, _ := op.Extensions["x-gateway-public"].(bool)
	r.Public = len(security) == 0 || gatewayPublic
	for _, req := range security {
		if len(req) == 0 {
			// {} among the alternatives means "credentials optional"; an HTTP API
			// route either has the authorizer or has none.
			problems = append(problems, fmt.Errorf("%s: optional security ({}) cannot be expressed on an HTTP API route", r.Key()))
		}
	}
	return r, problems
}
