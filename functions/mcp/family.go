package mcp

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Family is the MCP family: POST /mcp, serving the tools of every family composed on the
// same Env. The local process composes every family; the MCP Lambda composes this one with
// the families whose tools it serves, for their tools alone (wiring.Served).
func Family() family.Family {
	return family.Family{Name: "mcp", Build: func(env *family.Env) family.Parts {
		return family.Parts{Routes: func(mux *httpapi.Mux) {
			// Routes run once every family is built: env.Tools holds all their tools.
			s, err := NewServer(env.Tools(), mcptool.Deps{Bots: env.Tenancy, Audit: env.Audit, Log: env.Log, Now: env.Now})
			if err != nil {
				// A tool whose arguments have no JSON schema is a declaration fault, found
				// by this package's tests, as a route declared twice is.
				panic(err)
			}
			Routes(mux, NewHandler(s))
		}}
	}}
}
