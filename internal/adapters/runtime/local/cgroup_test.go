package local_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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

// TestAgentResourcesBoundItsCgroup: an Agent's spec.resources size its cgroup on the local
// runtime as they size its container on kube: a memory limit below the runtime's default stops
// a hog at it, the gateway's Node heap follows it, and the cpu limit and request become the
// cgroup's quota and weight.
func TestAgentResourcesBoundItsCgroup(t *testing.T) {
	f := limited(t, local.DefaultMemoryLimit, local.DefaultPidsLimit)
	a := newAgent("sized")
	a.Spec.Resources = &agentsv1.AgentResources{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("250m")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}
	waitPhase(t, f, a, desired("sized-gateway-token-0123456789abc"), runtime.PhaseRunning)
	const limit = 64 << 20
	res := sh(t, f, "sized", "x=$(head -c "+strconv.Itoa(2*limit)+" /dev/zero | tr '\\0' a); echo survived ${#x}")
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "survived") {
		t.Fatalf("a shell holding %d bytes in an agent limited to 64Mi: exit %d %q, want it killed", 2*limit, res.ExitCode, res.Stdout)
	}
	if env, err := os.ReadFile("/proc/" + strconv.Itoa(gatewayPID(t, f, a)) + "/environ"); err != nil || !strings.Contains(string(env), "--max-old-space-size=48 ") {
		t.Errorf("the gateway's Node heap with a 64Mi limit: want --max-old-space-size=48 (75%%) in %q (%v)", env, err)
	}
	uid := strings.TrimSpace(string(sh(t, f, "sized", "id -u").Stdout))
	checked := 0
	for file, want := range map[string]string{
		"/sys/fs/cgroup/cpu/agentplane-agents/uid-" + uid + "/cpu.cfs_quota_us": "25000",
		"/sys/fs/cgroup/cpu/agentplane-agents/uid-" + uid + "/cpu.shares":       "102",
		"/sys/fs/cgroup/agentplane-agents/uid-" + uid + "/cpu.max":              "25000 100000",
		"/sys/fs/cgroup/agentplane-agents/uid-" + uid + "/cpu.weight":           "9",
	} {
		got, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue // the other cgroup version's file
		}
		checked++
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("%s = %q (%v), want %s", file, got, err, want)
		}
	}
	if checked < 2 {
		t.Errorf("no cpu controller for the agents' cgroups on this host (%d files found)", checked)
	}
}
