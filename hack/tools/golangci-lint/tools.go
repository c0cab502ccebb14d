//go:build tools

// Package tools pins golangci-lint, built from its Go module by hack/build-golangci-lint.sh.
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
