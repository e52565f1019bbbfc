// Package authorizer is the shared API Gateway REQUEST authorizer: it authenticates the
// Authorization header of every /api/* request with the same shared/auth code the local
// process uses and hands the principal to the family Lambda. It never decides per route;
// see shared/apigw for why.
package authorizer

import (
	"context"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botplatform/api/shared/apigw"
	"github.com/botplatform/api/shared/auth"
)

// Handler returns the Lambda handler. A failure to look the token up (the store is down) is
// returned as an error, which API Gateway answers with 500 and does not cache.
func Handler(svc *auth.Service, log *slog.Logger) func(context.Context, events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	return func(ctx context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
		p, err := svc.Authenticate(ctx, header(req.Headers, "authorization"))
		if err == nil {
			return apigw.Allow(p)
		}
		if res, ok := apigw.Refuse(err); ok {
			return res, nil
		}
		// Never the header itself: it is a credential.
		log.ErrorContext(ctx, "authorizer lookup failed", "request_id", req.RequestContext.RequestID, "error", err)
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
}

// header finds a header whatever its case (payload 2.0 lower-cases names, tests may not).
func header(h map[string]string, name string) string {
	if v, ok := h[name]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
