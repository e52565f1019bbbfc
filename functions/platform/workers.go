package platform

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botplatform/api/functions/authorizer"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/audit/eventbridge"
	"github.com/botplatform/api/shared/auth"
)

// AuthorizerLambda builds the shared authorizer's handler over the table. It keeps no
// principal cache: API Gateway caches its answers already, and a second cache would stretch
// how long a revoked token keeps working.
func AuthorizerLambda(ctx context.Context, log *slog.Logger) (func(context.Context, events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error), error) {
	_, st, err := loadStore(ctx, log)
	if err != nil {
		return nil, err
	}
	return authorizer.Handler(auth.NewService(st, time.Now, log, auth.WithCacheTTL(0)), log), nil
}

// AuditSinkLambda builds the handler that stores the audit events the bus's rule delivers.
func AuditSinkLambda(ctx context.Context, log *slog.Logger) (func(context.Context, events.EventBridgeEvent) error, error) {
	_, st, err := loadStore(ctx, log)
	if err != nil {
		return nil, err
	}
	sink, err := eventbridge.NewSink(audit.NewLog(st), eventbridge.DefaultSource)
	if err != nil {
		return nil, err
	}
	return sink.Handle, nil
}
