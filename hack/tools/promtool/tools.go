//go:build tools

// Package promtool pins Prometheus's promtool, which checks and unit-tests the alerting rules in
// config/monitoring (make promtool builds it into the user cache; make test depends on it). A
// module of its own keeps Prometheus's dependencies out of the main go.mod.
package promtool

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
