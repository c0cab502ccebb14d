package local_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"

	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

func TestEnsureStartsGatewayOnce(t *testing.T) {
	f := newFixture(t)
	a := newAgent("first")
	d := desired("tok-first-0123456789")

	o := ensure(t, f, a, d)
	if o.Phase != runtime.PhaseStarting || !strings.HasPrefix(o.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("first Ensure = %+v", o)
	}
	pid := gatewayPID(t, f, a)
	if !alive(pid) {
		t.Fatalf("gateway pid %d does not run", pid)
	}
	// The supervisor notices the gateway became healthy and notifies.
	deadline := time.Now().Add(eventBound)
	for f.notified.count(keyOf(a)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Notify was not called")
		}
		time.Sleep(10 * time.Millisecond)
	}
	o = waitPhase(t, f, a, d, runtime.PhaseRunning)
	if o.EngineVersion != fakeVersion || o.Restarts != 0 || o.Since.IsZero() {
		t.Fatalf("running = %+v", o)
	}
	// More Ensures start nothing.
	for range 3 {
		if o2 := ensure(t, f, a, d); o2.Phase != runtime.PhaseRunning || o2.Endpoint != o.Endpoint {
			t.Fatalf("Ensure again = %+v", o2)
		}
	}
	if got := gatewayPID(t, f, a); got != pid {
		t.Fatalf("pid changed from %d to %d", pid, got)
	}

	dir := f.rt.AgentDir(keyOf(a))
	for _, p := range []string{"home", "home/.openclaw"} {
		if info, err := os.Stat(filepath.Join(dir, p)); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", p, info.Mode(), err)
		}
	}
	// The engine made the workspace on its first start (the runtime leaves the state dir to
	// the config alone, for the engine's new-install path).
	if info, err := os.Stat(filepath.Join(dir, "home/.openclaw/workspace")); err != nil || !info.IsDir() {
		t.Errorf("workspace: %v", err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "home/.openclaw/openclaw.json"))
	if err != nil || !strings.Contains(string(cfg), d.GatewayToken) || !strings.Contains(string(cfg), "Tester") {
		t.Fatalf("config: %v\n%s", err, cfg)
	}
	if info, _ := os.Stat(filepath.Join(dir, "home/.openclaw/openclaw.json")); info.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v", info.Mode())
	}
	// The token is never on a command line nor in the runtime's state file.
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	state, _ := os.ReadFile(filepath.Join(dir, "state.json"))
	if strings.Contains(string(cmdline), d.GatewayToken) || strings.Contains(string(state), d.GatewayToken) {
		t.Fatal("the token leaked into the command line or state.json")
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "gateway.log")); !strings.Contains(string(log), "[gateway] ready") {
		t.Errorf("gateway.log: %s", log)
	}
	if code := invoke(t, o.Endpoint, d.GatewayToken); code != 404 {
		t.Fatalf("invoke with the token = %d", code)
	}
}

func TestTokenRotationWithoutRestart(t *testing.T) {
	f := newFixture(t)
	a := newAgent("rotate")
	d := desired("old-token-aaaaaaaaaaaa")
	o := waitPhase(t, f, a, d, runtime.PhaseRunning)
	pid := gatewayPID(t, f, a)
	waitStatus(t, o.Endpoint, "old-token-aaaaaaaaaaaa", 404)

	d.GatewayToken = "new-token-bbbbbbbbbbbb"
	if o2 := ensure(t, f, a, d); o2.Phase != runtime.PhaseRunning {
		t.Fatalf("after rotation = %+v", o2)
	}
	waitStatus(t, o.Endpoint, "new-token-bbbbbbbbbbbb", 404)
	waitStatus(t, o.Endpoint, "old-token-aaaaaaaaaaaa", 401)
	if got := gatewayPID(t, f, a); got != pid || !alive(pid) {
		t.Fatalf("the gateway restarted: pid %d -> %d", pid, got)
	}
	cfg := filepath.Join(f.rt.AgentDir(keyOf(a)), "home/.openclaw/openclaw.json")
	if info, _ := os.Stat(cfg); info.Mode().Perm() != 0o600 {
		t.Errorf("config mode after rotation %v", info.Mode())
	}
}

func TestSpecChangesRestartOnSamePort(t *testing.T) {
	f := newFixture(t)
	a := newAgent("restart")
	d := desired("tok-restart-000000000")
	o := waitPhase(t, f, a, d, runtime.PhaseRunning)
	pid := gatewayPID(t, f, a)

	for i, change := range []func(*runtime.Desired){
		func(d *runtime.Desired) { d.Env = map[string]string{"SPEC_CHANGED": "1"} },
		func(d *runtime.Desired) { d.RestartNonce = "2026-01-01T00:00:00Z" },
	} {
		change(&d)
		o2 := ensure(t, f, a, d)
		if o2.Phase != runtime.PhaseStarting {
			t.Fatalf("change %d: Ensure = %+v, want Starting", i, o2)
		}
		newPID := gatewayPID(t, f, a)
		if newPID == pid || newPID == 0 {
			t.Fatalf("change %d: pid %d -> %d", i, pid, newPID)
		}
		waitGone(t, pid)
		o2 = waitPhase(t, f, a, d, runtime.PhaseRunning)
		if o2.Endpoint != o.Endpoint || o2.Restarts != 0 {
			t.Fatalf("change %d: %+v (port must be kept, no crash counted)", i, o2)
		}
		pid = newPID
	}
}

func TestStoppedStopsAndStartsAgain(t *testing.T) {
	f := newFixture(t)
	a := newAgent("stopper")
	d := desired("tok-stop-0000000000000")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	pid := gatewayPID(t, f, a)

	d.Stopped = true
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseStopped || o.Endpoint != "" {
		t.Fatalf("stopped = %+v", o)
	}
	if alive(pid) {
		t.Fatalf("pid %d still runs", pid)
	}
	if got := gatewayPID(t, f, a); got != 0 {
		t.Fatalf("gateway.pid still says %d", got)
	}
	// The supervisor must not bring it back: two of its rounds (the second after any restart
	// the first could have scheduled) leave it stopped.
	if !local.SupervisorRounds(f.rt, a.Namespace, a.Name, 2) {
		t.Fatal("the agent's supervisor is gone")
	}
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseStopped {
		t.Fatalf("stopped again = %+v", o)
	}
	d.Stopped = false
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	if p := gatewayPID(t, f, a); p == pid || !alive(p) {
		t.Fatalf("restart after stop: pid %d", p)
	}
}

func TestCrashRestartsWithBackoff(t *testing.T) {
	f := newFixture(t)
	a := newAgent("crashy")
	d := desired("tok-crash-secretvalue-1234")
	d.Env = map[string]string{"FAKECLAW_CRASH_AFTER": "100ms", "ATTACHED_SECRET": "attached-secret-value"}

	ensure(t, f, a, d)
	o := waitPhase(t, f, a, d, runtime.PhaseCrashed)
	if o.Reason != agentsv1.ReasonCrashed || !strings.Contains(o.Message, "exit code 1") ||
		!strings.Contains(o.Message, "gateway crashed (FAKECLAW_CRASH_AFTER=100ms)") {
		t.Fatalf("crashed = %+v", o)
	}
	if strings.Contains(o.Message, d.GatewayToken) || strings.Contains(o.Message, "attached-secret-value") {
		t.Fatalf("a secret leaked into the message: %q", o.Message)
	}
	if o.Restarts < 1 {
		t.Fatalf("restarts = %d", o.Restarts)
	}
	// Ensure while crashed does not bypass the backoff.
	for range 20 {
		ensure(t, f, a, d)
	}

	// Each restart waits its backoff (200 ms, doubling, up to 800 ms) after a crash that comes
	// 100 ms into the run: the gaps between starts are at least those sums, however slow the
	// machine (load only lengthens them). Without the backoff, they are a boot and 100 ms.
	var starts []time.Time
	for deadline := time.Now().Add(eventBound); len(starts) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d gateway starts after %s, want 5", len(starts), eventBound)
		}
		starts = startTimes(t, f, a)
	}
	for i, backoff := range []time.Duration{200, 400, 800, 800} {
		gap, least := starts[i+1].Sub(starts[i]), 100*time.Millisecond+backoff*time.Millisecond
		t.Logf("start %d: %s after the one before (at least %s)", i+2, gap, least)
		if gap < least {
			t.Errorf("start %d came %s after the one before, want at least %s: the backoff is not applied", i+2, gap, least)
		}
	}
	o = ensure(t, f, a, d)
	if o.Restarts < int32(len(starts)-1) {
		t.Fatalf("restarts %d after %d starts", o.Restarts, len(starts))
	}
	// Healing the spec (no crash env, new hash) starts at once with a fresh backoff.
	d.Env = nil
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseStarting {
		t.Fatalf("healed = %+v", o)
	}
	o = waitPhase(t, f, a, d, runtime.PhaseRunning)
	if o.Reason != "" || o.Message != "" {
		t.Fatalf("running after crashes = %+v", o)
	}
}

func TestStartFailureIsCrashed(t *testing.T) {
	f := newFixture(t)
	a := newAgent("nostart")
	d := desired("tok-nostart-00000000000")
	d.Env = map[string]string{"FAKECLAW_FAIL_START": "1"}
	o := waitPhase(t, f, a, d, runtime.PhaseCrashed)
	if o.Reason != agentsv1.ReasonCrashed || !strings.Contains(o.Message, "gateway failed to start") {
		t.Fatalf("crashed = %+v", o)
	}

	if _, err := f.rt.Ensure(context.Background(), newAgent("other"), runtime.Desired{EngineVersion: "0.0.0"}); err == nil ||
		!strings.Contains(err.Error(), "not installed") {
		t.Fatalf("unknown version: %v", err)
	}
}

func TestDeleteRemovesEverything(t *testing.T) {
	f := newFixture(t)
	a := newAgent("doomed")
	waitPhase(t, f, a, desired("tok-doomed-00000000000"), runtime.PhaseRunning)
	pid := gatewayPID(t, f, a)
	dir := f.rt.AgentDir(keyOf(a))

	if err := f.rt.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("pid %d survived Delete", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("agent dir survived: %v", err)
	}
	// Deleting again is fine.
	if err := f.rt.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// TestReadoptionAfterManagerRestart: gateways outlive a manager that keeps them running, and
// the next one adopts them, both as plain processes and as the checkpointable sandboxes a
// runtime with CRIU starts (make run's default), whose gateway runs in a session of its own.
func TestReadoptionAfterManagerRestart(t *testing.T) {
	keep := func(o *local.Options) { o.KeepRunningOnShutdown = true }
	t.Run("plain", func(t *testing.T) { checkReadoption(t, newFixture(t, keep)) })
	t.Run("checkpointable", func(t *testing.T) { checkReadoption(t, checkpointing(t, keep)) })
}

func checkReadoption(t *testing.T, f1 *fixture) {
	a, b := newAgent("survivor"), newAgent("victim")
	d := desired("tok-survivor-0000000000")
	o := waitPhase(t, f1, a, d, runtime.PhaseRunning)
	waitPhase(t, f1, b, d, runtime.PhaseRunning)
	pid, victim := gatewayPID(t, f1, a), gatewayPID(t, f1, b)
	if err := f1.rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !alive(pid) || !alive(victim) {
		t.Fatal("KeepRunningOnShutdown stopped a gateway")
	}
	// The victim dies while no manager runs.
	if err := syscallKill(victim); err != nil {
		t.Fatal(err)
	}
	waitGone(t, victim)

	opts := f1.opts
	opts.KeepRunningOnShutdown = false
	opts.Notify = nil
	// A crash is seen as Crashed for the whole backoff: long enough for a loaded machine's
	// polls to catch it before the restart.
	opts.RestartBackoff = local.Backoff{Initial: 2 * time.Second, Max: 4 * time.Second}
	f2 := newFixtureWith(t, opts)
	o2 := waitPhase(t, f2, a, d, runtime.PhaseRunning)
	if got := gatewayPID(t, f2, a); got != pid || o2.Endpoint != o.Endpoint {
		t.Fatalf("not adopted: pid %d -> %d, endpoint %s -> %s", pid, got, o.Endpoint, o2.Endpoint)
	}
	waitStatus(t, o2.Endpoint, d.GatewayToken, 404)
	// The victim is started afresh on its next Ensure, on its old port.
	ob := waitPhase(t, f2, b, d, runtime.PhaseRunning)
	if p := gatewayPID(t, f2, b); p == victim || !alive(p) {
		t.Fatalf("victim pid %d", p)
	}
	_ = ob

	// The adopted gateway is watched: when it dies it is Crashed and restarted.
	if err := syscallKill(pid); err != nil {
		t.Fatal(err)
	}
	oc := waitPhase(t, f2, a, d, runtime.PhaseCrashed)
	if !strings.Contains(oc.Message, "adopted") {
		t.Fatalf("crash of an adopted gateway: %+v", oc)
	}
	waitPhase(t, f2, a, d, runtime.PhaseRunning)

	// Shutdown (dev mode default) leaves nothing behind.
	pa, pb := gatewayPID(t, f2, a), gatewayPID(t, f2, b)
	if err := f2.rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if alive(pa) || alive(pb) {
		t.Fatalf("Shutdown left %d/%d running", pa, pb)
	}
	if _, err := f2.rt.Ensure(context.Background(), a, d); err == nil {
		t.Fatal("Ensure after Shutdown succeeded")
	}
}

func TestStatePersistsPortAndRestarts(t *testing.T) {
	f := newFixture(t)
	a := newAgent("stateful")
	o := waitPhase(t, f, a, desired("tok-state-000000000000"), runtime.PhaseRunning)
	b, err := os.ReadFile(filepath.Join(f.rt.AgentDir(keyOf(a)), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Port int `json:"port"`
		PID  int `json:"pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if o.Endpoint != "http://127.0.0.1:"+strconv.Itoa(st.Port) || st.PID != gatewayPID(t, f, a) {
		t.Fatalf("state %s vs %+v", b, o)
	}
}

// startTimes are the times of the gateway's starts, read from the lines its log gets before
// each one.
func startTimes(t *testing.T, f *fixture, a *agentsv1.Agent) []time.Time {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.rt.AgentDir(keyOf(a)), "gateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "--- agentplane ")
		if stamp, _, found := strings.Cut(rest, ": starting "); ok && found {
			at, err := time.Parse(local.StartLineTime, stamp)
			if err != nil {
				t.Fatalf("start line %q: %v", line, err)
			}
			out = append(out, at)
		}
	}
	return out
}

// The engine refuses to finish a start whose config file changed meanwhile (exit 78,
// "migration inputs changed during startup") and asks to be started again, as happens when
// the Agent controller renders the config of a gateway that is still starting: the runtime
// starts it again at once, without a crash or a backoff. An exit 78 on the config the gateway
// started on (one the engine cannot read) stays a crash.
func TestConfigWrittenWhileStartingStartsAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cfgPath := openclaw.New().Layout().ConfigPath
	a := newAgent("rendered")
	d := desired("tok-rendered-00000000000")
	d.Env = map[string]string{"FAKECLAW_BOOT_DELAY": "1h"}
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseStarting {
		t.Fatalf("started = %+v", o)
	}
	first := gatewayPID(t, f, a)
	for deadline := time.Now().Add(eventBound); gatewayStarts(t, f, a, "[gateway] starting on the config read") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not read its config within %s", eventBound)
		}
	}
	cfg, err := f.rt.ReadFile(ctx, a, cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.rt.WriteFile(ctx, a, cfgPath, append(cfg, '\n')); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(eventBound); gatewayPID(t, f, a) == first; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway (pid %d) was not started again within %s of the config's change", first, eventBound)
		}
	}
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseStarting || o.Restarts != 0 || o.Reason != "" {
		t.Fatalf("started again on the new config = %+v, want starting with no restart counted", o)
	}
	if gatewayStarts(t, f, a, "migration inputs changed during startup") != 1 {
		t.Fatal("the gateway's log does not show the engine's refusal once")
	}

	b := newAgent("unreadable")
	d = desired("tok-unreadable-000000000")
	waitPhase(t, f, b, d, runtime.PhaseRunning)
	if err := f.rt.WriteFile(ctx, b, cfgPath, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	d.RestartNonce = "again"
	o := waitPhase(t, f, b, d, runtime.PhaseCrashed)
	if o.Reason != agentsv1.ReasonCrashed || !strings.Contains(o.Message, "exit code 78") || o.Restarts < 1 {
		t.Fatalf("an exit 78 on an unreadable config = %+v, want a crash", o)
	}
}
