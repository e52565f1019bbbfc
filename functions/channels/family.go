package channels

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// FromEnv is the channels service of env, nil without a secrets sealer (SECRETS_KEY_ID on
// AWS): then credentials can be neither sealed nor opened.
func FromEnv(env *family.Env) *Service {
	if env.Secrets == nil {
		return nil
	}
	return NewService(env.Store, env.Secrets, env.Adapters, env.Now, env.PublicURL)
}

// Family is the channels family. Without a sealer every channel route answers 503: the
// routes exist, credentials cannot be sealed.
func Family() family.Family {
	return family.Family{Name: "channels", Build: func(env *family.Env) family.Parts {
		svc := FromEnv(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { Routes(mux, svc, env.Cursors) },
			Purge:  PurgeStep(env.Store, svc),
		}
	}}
}
