// Package docs embeds the API's published documents so every process serves the same bytes.
package docs

import _ "embed"

//go:generate go run ./gen openapi

// OpenAPI is the OpenAPI 3.1 document of the token API (docs/openapi.yaml), merged from the
// per-family fragments in docs/openapi/.
//
//go:embed openapi.yaml
var OpenAPI []byte

// SDKOpenAPI is the OpenAPI 3.1 document of the customer SDK's device surface
// (docs/sdk-openapi.yaml), served at GET /sdk/openapi.yaml. It is kept apart from OpenAPI
// because its callers are devices holding installation tokens, not token-API clients.
//
//go:embed sdk-openapi.yaml
var SDKOpenAPI []byte

// Documents are every published document: the gateway routes, and the families register,
// the operations of all of them.
var Documents = [][]byte{OpenAPI, SDKOpenAPI}
