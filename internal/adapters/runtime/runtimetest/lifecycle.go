package runtimetest

import (
	"slices"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// A new agent's first Ensure provisions it and reports Starting; it runs once its gateway is
// healthy, with the engine version asked for.
func testStartsThenRuns(t *testing.T, f *Fixture) {
	a := f.agent(t, "starts")
	d := f.desired(a)
	if o := f.ensure(t, a, d); o.Phase != runtime.PhaseStarting || o.Endpoint == "" {
		t.Fatalf("first Ensure = %+v, want Starting with an endpoint", o)
	}
	o, _ := f.waitRunning(t, a, d)
	if o.Restarts != 0 {
		t.Errorf("Running = %+v, want no restart", o)
	}
}

// Ensure is idempotent: the controller calls it on every reconcile with a Desired built
// afresh, and the gateway stays the one that runs.
func testIdempotent(t *testing.T, f *Fixture) {
	a, _, o, gw := f.running(t, "same")
	for i := range 3 {
		f.settle(t, a)
		again := f.ensure(t, a, f.desired(a))
		if again.Phase != runtime.PhaseRunning || again.Endpoint != o.Endpoint || !again.Since.Equal(o.Since) {
			t.Fatalf("Ensure %d with the same Desired = %+v, was %+v", i, again, o)
		}
		if g := f.Gateway(t, a); g != gw {
			t.Fatalf("Ensure %d with the same Desired replaced the gateway: %q -> %q", i, gw, g)
		}
	}
}

// A change of what the gateway starts with (Desired.ConfigHash), a restart asked for, or
// another engine version replace the gateway: Ensure reports Starting at once (never the old
// gateway as Running) and the new gateway runs.
func testChangesReplace(t *testing.T, f *Fixture) {
	changes := []struct {
		name   string
		change func(*runtime.Desired)
	}{
		{"Env", func(d *runtime.Desired) {
			if d.Env == nil {
				d.Env = map[string]string{}
			}
			d.Env["RUNTIMETEST_CHANGED"] = "1"
		}},
		{"RestartNonce", func(d *runtime.Desired) { d.RestartNonce = "2026-01-01T00:00:00Z" }},
		{"EngineVersion", func(d *runtime.Desired) { d.EngineVersion = f.OtherVersion }},
	}
	if f.OtherVersion == "" {
		t.Fatal("the fixture names no other engine version")
	}
	a, d, _, gw := f.running(t, "changes")
	for _, c := range changes {
		before := d.ConfigHash()
		c.change(&d)
		if c.name == "Env" && d.ConfigHash() == before {
			t.Fatal("the Env change does not change Desired.ConfigHash")
		}
		if o := f.ensure(t, a, d); o.Phase != runtime.PhaseStarting {
			t.Fatalf("%s: the Ensure that changes it = %+v, want Starting", c.name, o)
		}
		_, now := f.waitRunning(t, a, d)
		if now == gw {
			t.Fatalf("%s: Running on the same gateway %q", c.name, gw)
		}
		f.settle(t, a)
		if o := f.ensure(t, a, d); o.Phase != runtime.PhaseRunning || f.Gateway(t, a) != now {
			t.Fatalf("%s: Ensure again = %+v on gateway %q, want Running on %q", c.name, o, f.Gateway(t, a), now)
		}
		gw = now
	}
}

// Stopped stops the gateway and keeps it stopped; Logs does not start it; clearing Stopped
// starts a new gateway.
func testStopped(t *testing.T, f *Fixture) {
	a, d, _, gw := f.running(t, "stopper")
	d.Stopped = true
	if o := f.ensure(t, a, d); o.Phase != runtime.PhaseStopped {
		t.Fatalf("Ensure Stopped = %+v", o)
	}
	f.waitFor(t, a, d, "the gateway gone", func(o runtime.Observed, g string) bool {
		return o.Phase == runtime.PhaseStopped && g == ""
	})
	if _, err := f.Runtime.Logs(f.ctx(t), a, runtime.LogRequest{Tail: 10}); err != nil {
		t.Errorf("Logs of a stopped agent: %v", err)
	}
	stayStopped(t, f, a, d)

	d.Stopped = false
	if o := f.ensure(t, a, d); o.Phase != runtime.PhaseStarting {
		t.Fatalf("Ensure after Stopped cleared = %+v, want Starting", o)
	}
	if _, now := f.waitRunning(t, a, d); now == gw {
		t.Fatalf("running again on the stopped gateway %q", gw)
	}
}

// stayStopped checks, for a while, that nothing brings a's gateway back.
func stayStopped(t *testing.T, f *Fixture, a *agentsv1.Agent, d runtime.Desired) {
	t.Helper()
	for range 5 {
		f.settle(t, a)
		time.Sleep(50 * time.Millisecond)
		if o, g := f.ensure(t, a, d), f.Gateway(t, a); o.Phase != runtime.PhaseStopped || g != "" {
			t.Fatalf("stopped agent: Ensure = %+v, gateway %q", o, g)
		}
	}
}

// An agent first ensured Stopped is provisioned without a gateway.
func testNewStopped(t *testing.T, f *Fixture) {
	a := f.agent(t, "asleep")
	d := f.desired(a)
	d.Stopped = true
	if o := f.ensure(t, a, d); o.Phase != runtime.PhaseStopped {
		t.Fatalf("first Ensure Stopped = %+v", o)
	}
	stayStopped(t, f, a, d)
	if len(f.Kept(t, a)) == 0 {
		t.Error("a stopped agent is not kept")
	}
}

// Delete stops the gateway and removes everything the runtime keeps for the agent; deleting
// again, or an agent never ensured, is fine; afterwards the agent has nothing to run
// commands in.
func testDelete(t *testing.T, f *Fixture) {
	a, _, _, _ := f.running(t, "doomed")
	if len(f.Kept(t, a)) == 0 {
		t.Fatal("Kept lists nothing of a running agent")
	}
	if err := f.Runtime.Delete(f.ctx(t), a); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if kept := f.Kept(t, a); len(kept) > 0 {
		t.Errorf("left after Delete: %v", kept)
	}
	if g := f.Gateway(t, a); g != "" {
		t.Errorf("gateway %q runs after Delete", g)
	}
	if err := f.Runtime.Delete(f.ctx(t), a); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if err := f.Runtime.Delete(f.ctx(t), f.NewAgent(t, "never")); err != nil {
		t.Errorf("Delete of an agent never ensured: %v", err)
	}
	wantNothing(t, f, a)
}

// An agent the runtime does not keep has nowhere to run commands or files, and no logs.
func testUnknownAgent(t *testing.T, f *Fixture) {
	wantNothing(t, f, f.agent(t, "ghost"))
}

func wantNothing(t *testing.T, f *Fixture, a *agentsv1.Agent) {
	t.Helper()
	ctx := f.ctx(t)
	_, err := f.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"true"}})
	wantErr(t, "Exec", err, runtime.ErrNotRunning)
	_, err = f.Runtime.ReadFile(ctx, a, "x")
	wantErr(t, "ReadFile", err, runtime.ErrNotRunning)
	wantErr(t, "WriteFile", f.Runtime.WriteFile(ctx, a, "x", []byte("x")), runtime.ErrNotRunning)
	if lines, err := f.Runtime.Logs(ctx, a, runtime.LogRequest{Tail: 10}); err != nil || len(lines) != 0 {
		t.Errorf("Logs = %q, %v; want no lines", lines, err)
	}
	if kept := f.Kept(t, a); len(kept) > 0 {
		t.Errorf("kept: %v", slices.Sorted(slices.Values(kept)))
	}
}
