//go:build tools

// Package oapicodegen pins oapi-codegen, which generates the Go client pkg/client from
// docs/openapi.json (make client). A module of its own keeps the generator's dependencies out of
// the main go.mod.
package oapicodegen

import (
	_ "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen"
)
