package public

import "github.com/botplatform/api/shared/family"

// Family is the public family: the OpenAPI document and the health check.
func Family() family.Family {
	return family.Family{Name: "public", Build: func(*family.Env) family.Parts {
		return family.Parts{Routes: Routes}
	}}
}
