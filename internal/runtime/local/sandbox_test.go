package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/runtime"
	"github.com/agentplane/agentplane/internal/runtime/local"
)

// sandboxed builds a fixture whose runtime must sandbox (it fails the test where this host
// cannot: under CI=true that is an error, elsewhere a skip says why).
func sandboxed(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, func(o *local.Options) { o.Sandbox = local.SandboxAuto })
	if ok, why := f.rt.Sandboxed(); !ok {
		if os.Getenv("CI") != "" {
			t.Fatalf("agents cannot be sandboxed on this CI machine: %s", why)
		}
		t.Skipf("this host cannot sandbox agents: %s", why)
	}
	return f
}

// sh runs a shell command inside agent name's sandbox.
func sh(t *testing.T, f *fixture, name, script string) runtime.ExecResult {
	t.Helper()
	res, err := f.rt.Exec(context.Background(), newAgent(name), runtime.ExecRequest{Argv: []string{"sh", "-c", script}, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// TestSandboxHidesThePlatformAndOtherAgents is what an attacker with console exec in agent A
// tried on an unsandboxed runtime: walk up from the home to the state dir (the platform's
// kubeconfig and keys live there), read another agent's engine config (its gateway token),
// read another agent's processes' environment (its attached secrets). Each is refused now.
func TestSandboxHidesThePlatformAndOtherAgents(t *testing.T) {
	f := sandboxed(t)
	// The platform's own files beside the agents (devenv writes these into the state dir).
	for _, name := range []string{"kubeconfig", "dev.env"} {
		if err := os.WriteFile(filepath.Join(f.opts.StateDir, name), []byte("platform secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	victim := newAgent("victim")
	d := desired("victim-gateway-token-0123456789")
	d.Env = map[string]string{"VICTIM_SECRET": "victim-attached-secret"}
	waitPhase(t, f, victim, d, runtime.PhaseRunning)
	victimHome := filepath.Join(f.rt.AgentDir(keyOf(victim)), "home")
	stoppedAgent(t, f, "attacker", nil)

	state := f.opts.StateDir
	cases := map[string]string{
		"the state dir's kubeconfig":      "cat " + state + "/kubeconfig",
		"the state dir's dev.env":         "cat " + state + "/dev.env",
		"another agent's engine config":   "cat " + victimHome + "/.openclaw/openclaw.json",
		"another agent's state":           "cat " + f.rt.AgentDir(keyOf(victim)) + "/state.json",
		"another agent's home, listed":    "ls " + victimHome,
		"a walk up from the home":         "cat ../../../../../kubeconfig ../../../../../../kubeconfig",
		"another agent's secret in /proc": "cat /proc/*/environ | tr '\\0' '\\n' | grep -q 'victim-attached[-]secret'",
		"another agent's token in /proc":  "cat /proc/*/cmdline /proc/*/environ | grep -q 'victim-gateway[-]token'",
		"the host's root home":            "ls /root/.kube /root/.ssh",
		"writing the engine":              "touch " + f.opts.EngineDirs[version] + "/bin/x",
	}
	for what, script := range cases {
		if res := sh(t, f, "attacker", script); res.ExitCode == 0 {
			t.Errorf("%s: reachable from inside an agent (exit 0): %q", what, res.Stdout)
		}
	}
	// The attacker's own home and /tmp (OpenClaw keeps its state locks there) are writable,
	// and its view of the state dir holds
	// nothing but the path to it.
	res := sh(t, f, "attacker", "touch .mine /tmp/mine && ls -A "+state+" && ls -A "+state+"/agents")
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "agents\n"+newAgent("x").Namespace {
		t.Errorf("own home or the state dir's view: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Its own PID namespace: only its own processes.
	res = sh(t, f, "attacker", "ls /proc | grep -c '^[0-9]'")
	if n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); n == 0 || n > 5 {
		t.Errorf("processes visible inside the sandbox: %q", res.Stdout)
	}
	if os.Geteuid() == 0 {
		res = sh(t, f, "attacker", "id -u; grep CapEff /proc/self/status")
		if out := string(res.Stdout); strings.HasPrefix(out, "0\n") || !strings.Contains(out, "0000000000000000") {
			t.Errorf("as root the agent runs as root or keeps capabilities: %q", out)
		}
	}
}

// TestSandboxSetsidDoesNotEscape: a process that leaves the command's process group and
// session (setsid) dies with the sandbox: with the command's end for console exec, with the
// gateway's stop for the gateway.
func TestSandboxSetsidDoesNotEscape(t *testing.T) {
	f := sandboxed(t)
	stoppedAgent(t, f, "escaper", nil)
	marker := "agentplane-escape-" + strconv.Itoa(os.Getpid())
	res := sh(t, f, "escaper", "setsid sh -c 'exec -a "+marker+" sleep 300' </dev/null >/dev/null 2>&1 & sleep 0.2; echo started")
	if res.ExitCode != 0 {
		t.Fatalf("exec: %+v", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for hostHas(marker) {
		if time.Now().After(deadline) {
			t.Fatal("a setsid process outlived its console exec")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHostGone waits until no process on this host has s in its command line.
func waitHostGone(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for hostHas(s) {
		if time.Now().After(deadline) {
			t.Fatalf("a process with %q in its command line still runs after %s", s, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hostPIDIn is the host pid of the process that is nsPID in the PID namespace of the sandbox
// whose bwrap is outer (nsPID itself when outer runs no sandbox).
func hostPIDIn(t *testing.T, outer, nsPID int) int {
	t.Helper()
	children, _ := os.ReadFile("/proc/" + strconv.Itoa(outer) + "/task/" + strconv.Itoa(outer) + "/children")
	own, _ := os.Readlink("/proc/" + strconv.Itoa(outer) + "/ns/pid")
	f := strings.Fields(string(children))
	if len(f) == 0 {
		return nsPID
	}
	ns, _ := os.Readlink("/proc/" + f[0] + "/ns/pid")
	if ns == "" || ns == own {
		return nsPID
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if l, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); l != ns {
			continue
		}
		status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if ids := strings.Fields(rest); len(ids) > 0 && ids[len(ids)-1] == strconv.Itoa(nsPID) {
					pid, _ := strconv.Atoi(e.Name())
					return pid
				}
			}
		}
	}
	t.Fatalf("no process %d in the sandbox of %d", nsPID, outer)
	return 0
}

// hostHas: some process on this host has s in its command line.
func hostHas(s string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// TestUnsandboxedServesOneWorkspace: without sandboxes the runtime refuses an agent of a
// second workspace rather than let two tenants share the host's files.
func TestUnsandboxedServesOneWorkspace(t *testing.T) {
	f := newFixture(t, func(o *local.Options) { o.Sandbox = local.SandboxOff })
	if ok, why := f.rt.Sandboxed(); ok || why == "" {
		t.Fatalf("Sandboxed() = %v %q with the sandbox off", ok, why)
	}
	d := desired("tok-first-0000000000")
	d.Stopped = true
	ensure(t, f, newAgent("first"), d)
	other := &agentsv1.Agent{}
	other.Namespace, other.Name = "ws-other", "second"
	if _, err := f.rt.Ensure(context.Background(), other, d); !errors.Is(err, local.ErrOtherWorkspace) {
		t.Fatalf("Ensure of a second workspace's agent = %v, want ErrOtherWorkspace", err)
	}
	ensure(t, f, newAgent("again"), d) // the first workspace is still served
}
