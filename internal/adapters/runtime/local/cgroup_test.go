package local_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// limited is a sandboxing fixture whose agents' cgroups allow memory bytes and pids processes.
func limited(t *testing.T, memory, pids int64) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "an agent's cgroup needs the manager to run as root")
	}
	return newFixture(t, func(o *local.Options) {
		o.Sandbox = local.SandboxRequired
		o.MemoryLimit, o.PidsLimit = memory, pids
	})
}

// TestAgentMemoryIsBounded: code in an agent that takes more memory than its limit is killed
// by the kernel inside the agent's cgroup, and the rest of the machine keeps its memory. The
// attempt is bounded at twice the limit.
func TestAgentMemoryIsBounded(t *testing.T) {
	const limit = 64 << 20
	f := limited(t, limit, local.DefaultPidsLimit)
	stoppedAgent(t, f, "hog", nil)
	res := sh(t, f, "hog", "x=$(head -c "+strconv.Itoa(2*limit)+" /dev/zero | tr '\\0' a); echo survived ${#x}")
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "survived") {
		t.Fatalf("a shell holding %d bytes in a %d-byte cgroup: exit %d %q %q, want it killed", 2*limit, limit, res.ExitCode, res.Stdout, res.Stderr)
	}
	// The same agent runs what fits.
	if res := sh(t, f, "hog", "x=$(head -c 1048576 /dev/zero | tr '\\0' a); echo survived ${#x}"); strings.TrimSpace(string(res.Stdout)) != "survived 1048576" {
		t.Fatalf("a small allocation after the kill: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestAgentPidsAreBounded: a fork bomb in an agent stops at its cgroup's pids limit (the
// attempt is bounded at twice the limit), and the agent's next command runs.
func TestAgentPidsAreBounded(t *testing.T) {
	const limit = 32
	f := limited(t, local.DefaultMemoryLimit, limit)
	stoppedAgent(t, f, "bomb", nil)
	// Each fork that succeeds prints its number; the shell gives up at the first refused one.
	res := sh(t, f, "bomb", "for i in $(seq "+strconv.Itoa(2*limit)+"); do sleep 60 & echo $i; done")
	lines := strings.Fields(string(res.Stdout))
	if len(lines) == 0 {
		t.Fatalf("no process forked at all: %q %q", res.Stdout, res.Stderr)
	}
	if n, err := strconv.Atoi(lines[len(lines)-1]); err != nil || n >= limit || !strings.Contains(string(res.Stderr), "Cannot fork") {
		t.Fatalf("forking %d processes in an agent limited to %d: %d forked (%q)", 2*limit, limit, n, res.Stderr)
	}
	if res := sh(t, f, "bomb", "echo ok"); strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("the agent's next command: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestGatewayOOMKillIsReported: a gateway the kernel ends for going over its agent's memory
// limit is reported as such (as kube reports an OOMKilled container), not as a plain crash.
func TestGatewayOOMKillIsReported(t *testing.T) {
	const limit = 64 << 20
	f := limited(t, limit, local.DefaultPidsLimit)
	d := desired("hog-gateway-token-0123456789abcdef")
	d.Env = map[string]string{"FAKECLAW_HOG_BYTES": strconv.Itoa(2 * limit)}
	a := newAgent("hog")
	o := waitObserved(t, f, a, d, func(o runtime.Observed) bool { return strings.Contains(o.Message, "OOMKilled") })
	if o.Reason != agentsv1.ReasonCrashed || !strings.Contains(o.Message, "memory limit of 64 MiB") {
		t.Fatalf("a gateway over its memory limit: %s %q, want %s saying OOMKilled and the limit", o.Reason, o.Message, agentsv1.ReasonCrashed)
	}
}
