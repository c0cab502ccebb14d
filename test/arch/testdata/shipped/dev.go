//go:build !nodevtools

package main

// Development tooling left out of the shipped build, as cmd/agentplane/devtools.go does: not a
// violation.
import "github.com/agentplane/agentplane/internal/devtools/devenv"

var _ = devenv.EnvFileName
