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
	Public bool   // security: [] — no authorizer
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
		// The OAuth providers' redirect after a CRM connection's consent screen: no token,
		// only the single-use, 5-minute state a start issued authenticates it
		// (functions/crm, docs/crm.md).
		"GET /api/integrations/crm/{provider}/callback",
	}
}

// Routes returns every operation of the OpenAPI document doc, sorted by route key. It
// reports every problem at once: an operation without a known x-family, a family that
// serves nothing, a security requirement an HTTP API cannot express, a public set other
// than PublicRoutes.
func Routes(doc []byte, families []string) ([]Route, error) {
	d, err := openapi3.NewLoader().LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	// The methods an HTTP API route can have (besides ANY, which the document never uses).
	routeMethods := []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}
	var (
		routes   []Route
		problems []error
		served   = map[string]bool{}
	)
	for path, item := range d.Paths.Map() {
		for method, op := range item.Operations() {
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
			served[r.Family] = true
			security := d.Security
			if op.Security != nil {
				security = *op.Security
			}
			r.Public = len(security) == 0
			for _, req := range security {
				if len(req) == 0 {
					// {} among the alternatives means "credentials optional"; an HTTP API
					// route either has the authorizer or has none.
					problems = append(problems, fmt.Errorf("%s: optional security ({}) cannot be expressed on an HTTP API route", r.Key()))
				}
			}
			routes = append(routes, r)
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
