// Command hellolambda is the cold-start baseline: the smallest aws-lambda-go function that
// answers an API Gateway event, built the same way as ours.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{"status":"ok"}`}, nil
	})
}
