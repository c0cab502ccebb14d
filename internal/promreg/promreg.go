// Package promreg registers Prometheus collectors that several platforms in one process (tests,
// facade replicas) share: the second registration returns the collector already registered.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg, or returns the collector of the same type already registered
// under its name. It panics on any other registration error (a programming error: a name
// registered with other labels).
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
