package kube

import (
	"context"
	"io"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// NewStubEngine gives the external tests the stub engine.
func NewStubEngine() engine.Engine { return stubEngine{} }

// SetExec replaces how r runs commands in pods (envtest has no kubelet).
func SetExec(r *Runtime, f func(ctx context.Context, namespace, pod string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error) {
	r.exec = f
}
