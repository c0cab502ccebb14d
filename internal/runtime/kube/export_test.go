package kube

import (
	"github.com/agentplane/agentplane/internal/engine"
)

// NewStubEngine gives the external tests the stub engine.
func NewStubEngine() engine.Engine { return stubEngine{} }
