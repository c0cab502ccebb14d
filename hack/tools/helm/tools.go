//go:build tools

// Package helm pins the helm CLI, which lints and renders the chart dist/chart (make helm, the
// chart tests). A module of its own keeps helm's dependencies out of the main go.mod; helm is
// built from its Go module, never downloaded as a release binary.
package helm

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
