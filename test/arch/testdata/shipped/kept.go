//go:build nodevtools

package main

import "github.com/agentplane/agentplane/internal/devtools/localcluster"

var _ localcluster.Baseline
