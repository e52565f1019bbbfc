// Package docs embeds the API's published documents so every process serves the same bytes.
package docs

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the token API (docs/openapi.yaml).
//
//go:embed openapi.yaml
var OpenAPI []byte
