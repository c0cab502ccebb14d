//go:build tools

// Package gvisor pins gVisor's runsc and its containerd shim (containerd-shim-runsc-v1), the
// local cluster's optional sandboxed runtime (RuntimeClass gvisor). A module of its own keeps
// gVisor's dependencies out of the main go.mod; both are built from gVisor's Go module (the
// `go` branch, buildable with plain `go build`), never downloaded as release binaries.
package gvisor

import (
	_ "gvisor.dev/gvisor/runsc"
	_ "gvisor.dev/gvisor/shim"
)
