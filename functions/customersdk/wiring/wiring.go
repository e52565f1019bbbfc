// Package wiring composes the customersdk family on a process's environment.
package wiring

import (
	"os"

	"github.com/botplatform/api/functions/customersdk"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Service builds the customer SDK service on env: the device surface (functions/sdk) and
// browser push (functions/webpush) wire their own adapters over it.
func Service(env *family.Env) *customersdk.Service {
	return customersdk.NewService(customersdk.Config{Store: env.Store, Sealer: env.Secrets, Key: env.SDKKey,
		Region: region(), Now: env.Now, Log: env.Log})
}

// region is the deployment's AWS region, "local" in the local process.
func region() string {
	if r := os.Getenv("AWS_REGION"); r != "" {
		return r
	}
	return "local"
}

// Family is the customersdk family: the token API's customer SDK management routes.
func Family() family.Family {
	return family.Family{Name: "customersdk", Build: func(env *family.Env) family.Parts {
		svc := Service(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { customersdk.Routes(mux, svc) },
			Purge:  customersdk.PurgeStep(env.Store),
		}
	}}
}
