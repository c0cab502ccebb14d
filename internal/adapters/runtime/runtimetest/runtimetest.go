// Package runtimetest is the contract suite every runtime.Runtime runs from its own tests:
// what the Agent controller and the facade's operations rely on of any runtime, whichever
// one the platform runs.
//
//	func TestContract(t *testing.T) { runtimetest.Run(t, newContractFixture) }
//
// Run calls newFixture once per subtest. A promise belongs here only when every runtime keeps
// it; what one runtime does its own way (the kube runtime rolls the pod on a new gateway
// token, the local runtime hot-reloads it; a stopped kube agent has no pod to run commands in,
// a stopped local agent still has its home; ErrUnavailable, which only the kube runtime has a
// dependency for) is tested in that runtime's package.
//
// The promises, and who shows them:
//
//   - Lifecycle, run against every fixture: a new agent is Starting, then Running with the
//     engine version it asked for; Ensure with the same Desired leaves the gateway alone; a
//     changed Desired.ConfigHash, RestartNonce or EngineVersion replaces it (Starting at once,
//     then Running on a new gateway); Stopped stops it and keeps it stopped, and clearing
//     Stopped starts a new one; Delete removes everything the runtime keeps for the agent and
//     is idempotent; an agent the runtime does not keep has nowhere to run commands or files
//     (ErrNotRunning) and no logs.
//   - The home, run only when Fixture.Gateways says gateways really run: files round-trip and
//     stay inside the home (ErrInvalidPath, ErrNotFound); they survive a stop and a start and
//     do not survive Delete; Exec runs in the home's workspace directory with the caller's environment, stdin,
//     exit code and separate outputs, bounded by its timeout and output cap; Logs reads the
//     gateway's output, tail and follow; ArchiveWorkspace and RestoreWorkspace round-trip the
//     workspace and replace the gateway.
//
// The local runtime's fixture (internal/adapters/runtime/local, over the fake engine) runs everything.
// The kube runtime's envtest fixture (kubetest.Fixture with Cluster.PlayKubelet, in
// internal/adapters/runtime/kube) runs the lifecycle: no pod runs there, so the test plays the
// StatefulSet controller and the kubelet between Ensure calls (Fixture.Settle: a pod and its
// home claim from the current template, marked Ready; a pod of an older template or of a set
// scaled to zero deleted). The kube runtime's home promises need a real pod: kubetest.Fixture
// without PlayKubelet runs them on a cluster with a real node (test/e2e/realnode can); short
// of that, internal/adapters/runtime/kube's own tests run its file, exec and archive scripts on this
// host, and its logs against a fake clientset.
package runtimetest

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Fixture is one runtime under test and what the suite needs to drive and inspect it.
type Fixture struct {
	// Runtime is the runtime under test.
	Runtime runtime.Runtime
	// NewAgent returns an agent named name the runtime has never seen, made where the runtime
	// needs it (kube: the Agent object in the API server, which owns the agent's objects).
	NewAgent func(t *testing.T, name string) *agentsv1.Agent
	// Desired is the desired state of a running gateway of agent a: an installed engine
	// version, a gateway token and (kube) the names of the Secrets that hold them.
	Desired func(a *agentsv1.Agent) runtime.Desired
	// OtherVersion is a second installed engine version, for the version change.
	OtherVersion string
	// RunningVersion is what Observed.EngineVersion reports of a running gateway of the
	// desired engine version (a fake engine reports its own).
	RunningVersion func(desired string) string
	// Layout is the engine's layout of the home (where the workspace is).
	Layout engine.Layout
	// BeforeEnsure, when set, writes what the Agent controller writes before it calls Ensure
	// with d (kube on a real node: the Secrets d names, which the pod reads).
	BeforeEnsure func(t *testing.T, a *agentsv1.Agent, d runtime.Desired)
	// Settle, when set, plays between two Ensure calls what the test environment lacks (under
	// envtest: the StatefulSet controller and the kubelet). The suite calls it while it waits.
	Settle func(t *testing.T, a *agentsv1.Agent)
	// Gateway identifies the gateway that serves a now (local: its process; kube: its pod),
	// "" when none runs. Another value means another gateway.
	Gateway func(t *testing.T, a *agentsv1.Agent) string
	// Kept lists what the runtime keeps for a (local: its directory; kube: its objects not
	// being deleted), empty when nothing.
	Kept func(t *testing.T, a *agentsv1.Agent) []string
	// Gateways says the runtime's gateways really run here, with their home: the suite then
	// runs the promises about files, commands, logs and archives too.
	Gateways bool
	// Timeout bounds each wait for a state (0: DefaultTimeout).
	Timeout time.Duration
}

// DefaultTimeout is how long the suite waits for a state when Fixture.Timeout is 0.
const DefaultTimeout = time.Minute

// Run runs the contract suite; newFixture makes the fixture of one subtest. The promises
// about the home run only when the fixtures' gateways run (Fixture.Gateways); otherwise they
// are not run here at all (the package doc says where they are shown).
func Run(t *testing.T, newFixture func(t *testing.T) *Fixture) {
	gateways := -1 // unknown until a fixture says
	fixture := func(t *testing.T) *Fixture {
		f := newFixture(t)
		g := 0
		if f.Gateways {
			g = 1
		}
		if gateways >= 0 && g != gateways {
			t.Fatal("the fixtures disagree on whether gateways run")
		}
		gateways = g
		return f
	}
	run := func(name string, test func(*testing.T, *Fixture)) {
		t.Run(name, func(t *testing.T) { test(t, fixture(t)) })
	}
	run("NewAgentStartsThenRuns", testStartsThenRuns)
	run("SameDesiredKeepsTheGateway", testIdempotent)
	run("ChangesReplaceTheGateway", testChangesReplace)
	run("StoppedStopsAndStartsAgain", testStopped)
	run("NewStoppedAgentNeverStarts", testNewStopped)
	run("DeleteRemovesTheAgent", testDelete)
	run("UnknownAgentHasNothing", testUnknownAgent)
	if gateways == 0 {
		t.Log("no gateway runs under this fixture: the promises about the home are shown where gateways run")
		return
	}
	home := func(name string, test func(*testing.T, *Fixture)) {
		run(name, func(t *testing.T, f *Fixture) {
			if f.Gateways {
				test(t, f)
			} // else only reached when -run left out every lifecycle subtest
		})
	}
	home("Files", testFiles)
	home("FilesStayInTheHome", testFilePaths)
	home("FilesSurviveStopAndStart", testFilesSurviveStop)
	home("FilesGoWithDelete", testFilesGoWithDelete)
	home("Exec", testExec)
	home("ExecBounds", testExecBounds)
	home("Logs", testLogs)
	home("ArchiveAndRestore", testArchiveRestore)
}

func (f *Fixture) timeout() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return DefaultTimeout
}

// ctx is a context for one call of the runtime.
func (f *Fixture) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), f.timeout())
	t.Cleanup(cancel)
	return ctx
}

// agent is a new agent that Delete removes when the test ends.
func (f *Fixture) agent(t *testing.T, name string) *agentsv1.Agent {
	t.Helper()
	a := f.NewAgent(t, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout())
		defer cancel()
		if err := f.Runtime.Delete(ctx, a); err != nil {
			t.Errorf("Delete at cleanup: %v", err)
		}
	})
	return a
}

// desired is a fresh copy of the fixture's Desired for a.
func (f *Fixture) desired(a *agentsv1.Agent) runtime.Desired {
	d := f.Desired(a)
	d.Env = maps.Clone(d.Env)
	return d
}

// ensure calls Ensure as the Agent controller does.
func (f *Fixture) ensure(t *testing.T, a *agentsv1.Agent, d runtime.Desired) runtime.Observed {
	t.Helper()
	if f.BeforeEnsure != nil {
		f.BeforeEnsure(t, a, d)
	}
	o, err := f.Runtime.Ensure(f.ctx(t), a, d)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return o
}

func (f *Fixture) settle(t *testing.T, a *agentsv1.Agent) {
	t.Helper()
	if f.Settle != nil {
		f.Settle(t, a)
	}
}

// waitFor calls Ensure (and Settle in between) until cond holds of what Ensure observes and
// of the gateway serving a.
func (f *Fixture) waitFor(t *testing.T, a *agentsv1.Agent, d runtime.Desired, what string, cond func(o runtime.Observed, gateway string) bool) runtime.Observed {
	t.Helper()
	deadline := time.Now().Add(f.timeout())
	for {
		o := f.ensure(t, a, d)
		gw := f.Gateway(t, a)
		if cond(o, gw) {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last observed %+v, gateway %q", what, f.timeout(), o, gw)
		}
		f.settle(t, a)
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRunning waits for a Running gateway of d and checks what Ensure reports of it.
func (f *Fixture) waitRunning(t *testing.T, a *agentsv1.Agent, d runtime.Desired) (runtime.Observed, string) {
	t.Helper()
	var gw string
	o := f.waitFor(t, a, d, "Running", func(o runtime.Observed, g string) bool {
		gw = g
		return o.Phase == runtime.PhaseRunning && g != ""
	})
	if want := f.RunningVersion(d.EngineVersion); o.EngineVersion != want || o.Endpoint == "" || o.Since.IsZero() {
		t.Fatalf("Running = %+v; want engine version %q, an endpoint and since when", o, want)
	}
	return o, gw
}

// running is a new agent with a Running gateway.
func (f *Fixture) running(t *testing.T, name string) (*agentsv1.Agent, runtime.Desired, runtime.Observed, string) {
	t.Helper()
	a := f.agent(t, name)
	d := f.desired(a)
	o, gw := f.waitRunning(t, a, d)
	return a, d, o, gw
}

// wantErr fails unless err is target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}
