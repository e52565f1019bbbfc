// Package wiring composes the sdk family (the device surface /sdk/v1/*) with the
// customersdk family, whose data it serves, and with browser push (the VAPID public key).
package wiring

import (
	"context"
	"os"

	"github.com/botplatform/api/functions/customersdk"
	customersdkwiring "github.com/botplatform/api/functions/customersdk/wiring"
	"github.com/botplatform/api/functions/sdk"
	webpushwiring "github.com/botplatform/api/functions/webpush/wiring"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the sdk family: the device surface, its OpenAPI document and the browser
// scripts. The VAPID public key a browser subscribes with is browser push's
// (webpush.Service.PublicKey).
func Family() family.Family {
	return family.Family{Name: "sdk", Build: func(env *family.Env) family.Parts {
		devices := Devices{SDK: customersdkwiring.Service(env)}
		push := webpushwiring.New(env, webpushwiring.OptionsFromEnv(os.Getenv))
		return family.Parts{
			Routes: func(mux *httpapi.Mux) {
				sdk.Routes(mux, sdk.Config{Devices: devices, Push: push, Events: env.Events, Limiter: ratelimit.New(env.Store, env.Now), Now: env.Now, Log: env.Log})
			},
		}
	}}
}

// Devices implements sdk.Devices over the customer SDK service.
type Devices struct{ SDK *customersdk.Service }

// ProjectOf implements sdk.Devices.
func (d Devices) ProjectOf(projectKey string) (string, error) {
	return d.SDK.BotOfProjectKey(projectKey)
}

// Register implements sdk.Devices.
func (d Devices) Register(ctx context.Context, in sdk.Registration) (any, string, error) {
	p, err := d.SDK.ProjectByKey(ctx, in.ProjectKey)
	if err != nil {
		return nil, "", err
	}
	inst, tok, err := d.SDK.RegisterInstallation(ctx, p, customersdk.InstallationRequest{Platform: customersdk.Platform(in.Platform), AppID: in.AppID,
		Origin: in.Origin, SDKVersion: in.SDKVersion, Locale: in.Locale, Timezone: in.Timezone, UserAgent: in.UserAgent})
	return inst, tok, err
}

// Authenticate implements sdk.Devices.
func (d Devices) Authenticate(ctx context.Context, token string) (sdk.Device, error) {
	inst, p, err := d.SDK.Authenticate(ctx, token)
	if err != nil {
		return sdk.Device{}, err
	}
	dev := sdk.Device{ID: inst.ID, BotID: inst.BotID, Platform: string(inst.Platform), AppID: inst.AppID, WebOrigins: p.WebOrigins}
	if inst.UserID != nil {
		dev.UserID = *inst.UserID
	}
	return dev, nil
}

// installation is the customer SDK's view of the device: the methods below need only
// its id, bot and platform, which the token proved.
func installation(dev sdk.Device) customersdk.Installation {
	return customersdk.Installation{ID: dev.ID, BotID: dev.BotID, Platform: customersdk.Platform(dev.Platform), AppID: dev.AppID}
}

// Identify implements sdk.Devices.
func (d Devices) Identify(ctx context.Context, dev sdk.Device, userID, userHash string, epoch int) (any, error) {
	return d.SDK.Identify(ctx, installation(dev), userID, userHash, epoch)
}

// PutWebPush implements sdk.Devices.
func (d Devices) PutWebPush(ctx context.Context, dev sdk.Device, endpoint, p256dh, authKey, consent string) (any, error) {
	inst, err := d.full(ctx, dev)
	if err != nil {
		return nil, err
	}
	return d.SDK.PutWebPush(ctx, inst, endpoint, p256dh, authKey, consent)
}

// PutMobileToken implements sdk.Devices.
func (d Devices) PutMobileToken(ctx context.Context, dev sdk.Device, kind, token string) (any, error) {
	return d.SDK.PutMobileToken(ctx, installation(dev), kind, token)
}

// RecordReceipt implements sdk.Devices.
func (d Devices) RecordReceipt(ctx context.Context, dev sdk.Device, subscriptionID, kind, messageID string) error {
	return d.SDK.RecordReceipt(ctx, installation(dev), subscriptionID, kind, messageID)
}

// full is the whole installation (its browser family, locale and time zone go with its
// push tokens).
func (d Devices) full(ctx context.Context, dev sdk.Device) (customersdk.Installation, error) {
	return d.SDK.InstallationOf(ctx, dev.BotID, dev.ID)
}
