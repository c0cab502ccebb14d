package local_test

import (
	"os"
	"strconv"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/adapters/runtime/runtimetest"
)

// otherVersion is a second version key of the fake engine, for the version change.
const otherVersion = "2026.9.7"

// TestContract runs the runtime contract over the fake engine: every promise, gateways run.
func TestContract(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) *runtimetest.Fixture {
		f := newFixture(t, func(o *local.Options) { o.EngineDirs[otherVersion] = o.EngineDirs[version] })
		return &runtimetest.Fixture{
			Runtime:        f.rt,
			NewAgent:       func(_ *testing.T, name string) *agentsv1.Agent { return newAgent(name) },
			Desired:        func(a *agentsv1.Agent) runtime.Desired { return desired("tok-" + a.Name + "-0123456789") },
			OtherVersion:   otherVersion,
			RunningVersion: func(string) string { return fakeVersion },
			Layout:         openclaw.New().Layout(),
			Gateway: func(t *testing.T, a *agentsv1.Agent) string {
				if pid := gatewayPID(t, f, a); alive(pid) {
					return strconv.Itoa(pid)
				}
				return ""
			},
			Kept: func(_ *testing.T, a *agentsv1.Agent) []string {
				if _, err := os.Stat(f.rt.AgentDir(keyOf(a))); err == nil {
					return []string{f.rt.AgentDir(keyOf(a))}
				}
				return nil
			},
			Gateways: true,
		}
	})
}
