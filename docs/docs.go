// Package docs embeds the API's published documents so every process serves the same bytes.
package docs

import _ "embed"

//go:generate go run ./gen openapi

// OpenAPI is the OpenAPI 3.1 document of the token API (docs/openapi.yaml), merged from the
// per-family fragments in docs/openapi/.
//
//go:embed openapi.yaml
var OpenAPI []byte
