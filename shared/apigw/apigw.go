// Package apigw adapts the kernel to API Gateway HTTP APIs (payload format 2.0): the Lambda
// handler around a router, and the principal that the shared authorizer hands to the family
// Lambdas in its context.
//
// The authorizer authenticates and never decides: API Gateway caches its answer per
// Authorization header across all routes, so a per-route decision there would leak between
// routes. It answers "authorized" with either the principal or the reason the credentials
// failed, and the family Lambda, which knows the route, answers 401 or 403 in the API's own
// problem+json shape. A family Lambda trusts only this context, never a client header.
package apigw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Keys of the authorizer context. HTTP API contexts hold only strings, numbers and booleans,
// so the principal travels as JSON text.
const (
	ContextPrincipal = "principal"
	ContextAuthError = "auth_error"
)

// The auth_error values, one per authentication failure.
var authErrors = map[string]error{
	"missing_credentials": auth.ErrMissingCredentials,
	"malformed_token":     auth.ErrMalformedToken,
	"unknown_token":       auth.ErrUnknownToken,
	"expired_token":       auth.ErrExpiredToken,
}

// Allow is the authorizer's answer for valid credentials.
func Allow(p *auth.Principal) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, fmt.Errorf("apigw: encode principal: %w", err)
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: true,
		Context:      map[string]any{ContextPrincipal: string(b)},
	}, nil
}

// Refuse is the authorizer's answer for credentials that failed authentication with err
// (one of auth's Err* errors). The request still reaches the family Lambda, which answers
// 401; other errors (the store is down) must not be answered this way, since API Gateway
// would cache them: the authorizer returns them as errors instead.
func Refuse(err error) (events.APIGatewayV2CustomAuthorizerSimpleResponse, bool) {
	for code, e := range authErrors {
		if errors.Is(err, e) {
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{
				IsAuthorized: true,
				Context:      map[string]any{ContextAuthError: code},
			}, true
		}
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, false
}

// Authenticator reads the principal from the authorizer context of the API Gateway request.
// Without that context (a route attached to no authorizer, a direct invocation) the request
// is unauthenticated: it fails closed. The token's expiry is checked again here, because API
// Gateway may serve a cached answer past it.
func Authenticator(now func() time.Time) httpapi.Authenticator {
	return func(r *http.Request) (*auth.Principal, error) {
		p, err := FromAuthorizer(r.Context())
		if err != nil {
			return nil, err
		}
		if !p.ExpiresAt.IsZero() && !now().Before(p.ExpiresAt) {
			return nil, auth.ErrExpiredToken
		}
		return p, nil
	}
}

// FromAuthorizer returns the principal the authorizer attached to the request.
func FromAuthorizer(ctx context.Context) (*auth.Principal, error) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(ctx)
	if !ok || rc.Authorizer == nil || rc.Authorizer.Lambda == nil {
		return nil, auth.ErrMissingCredentials
	}
	lc := rc.Authorizer.Lambda
	if code, ok := lc[ContextAuthError].(string); ok {
		if e, known := authErrors[code]; known {
			return nil, e
		}
		return nil, auth.ErrUnknownToken
	}
	raw, ok := lc[ContextPrincipal].(string)
	if !ok {
		return nil, auth.ErrMissingCredentials
	}
	var p auth.Principal
	if err := json.Unmarshal([]byte(raw), &p); err != nil || p.AccountID == "" || p.TokenID == "" {
		return nil, auth.ErrUnknownToken
	}
	return &p, nil
}

// Handler is the Lambda handler serving h for API Gateway HTTP API events.
func Handler(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return httpadapter.NewV2(h).ProxyWithContext
}
