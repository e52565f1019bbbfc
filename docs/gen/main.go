// Command gen merges the OpenAPI fragments in docs/openapi/ into docs/openapi.yaml, the one
// document the API serves. The base fragment (00-base.yaml) holds everything shared; every
// other fragment holds one family's paths and the components only it uses. Run it with
// `go generate ./docs`; a test fails while docs/openapi.yaml is out of date.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/botplatform/api/docs/openapimerge"
)

func main() {
	dir := "openapi"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	out, err := openapimerge.Dir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "openapi.yaml"), out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
