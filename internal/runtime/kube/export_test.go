package kube

import (
	"time"

	"github.com/agentplane/agentplane/internal/engine"
)

// NewStubEngine gives the external tests the stub engine.
func NewStubEngine() engine.Engine { return stubEngine{} }

// SetClock replaces the runtime's clock.
func SetClock(r *Runtime, now func() time.Time) { r.clock = now }
