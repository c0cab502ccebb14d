// Package openapi embeds the OpenAPI document of the REST facade. The document is generated
// by `make docs` (go run ./hack/gendocs) from the facade's route table and route
// descriptions; docs/openapi.json is the same file, and apiserver's tests fail when either
// is stale.
package openapi

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.json
var document []byte

// JSON returns the OpenAPI document (a copy).
func JSON() []byte { return bytes.Clone(document) }
