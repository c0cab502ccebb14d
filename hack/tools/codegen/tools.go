//go:build tools

// Package codegen pins controller-gen, which generates deepcopy code, CRDs and RBAC.
package codegen

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
