package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// A gateway born from its engine's template (the binaries' default as root with CRIU and the
// reseed addon): the template is made once before the rounds, untimed, as a manager makes it
// once per engine; each round restores a copy in a fresh runtime sharing its dir. A copy's
// processes carry the template's marker, not the agent's: they are found by the agent's
// cgroup (their CPU time counts from the restore: the kernel's counters are not restored);
// the manager's part (the home copied, the image rewritten for the agent's uid, CRIU's
// restore) is this process's CPU time and its children's during the create.

// copyOptions are the runtime's options for the copy side: shipped defaults with templates.
func copyOptions(state, engineDir, version, cache, templates string) local.Options {
	return local.Options{
		StateDir: state, Engine: openclaw.New(), EngineDirs: map[string]string{version: engineDir},
		Log: logr.Discard(), Sandbox: local.SandboxAuto, CompileCacheDir: cache,
		Templates: true, TemplateDir: templates,
	}
}

// makeTemplate makes the engine's template in templates (untimed). The reseed addon is
// $AGENTPLANE_RESEED, else the checkout's bin/ (make sandbox-packages builds it): `go run`
// runs this program from a temporary dir, where the runtime's own default does not find it.
func makeTemplate(ctx context.Context, engineDir, version, cache, templates string) error {
	benchkit.BinEnv(local.ReseedEnv, local.ReseedName)
	state, err := os.MkdirTemp("", "agentplane-bench-coldstart-template-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	rt, err := local.New(copyOptions(state, engineDir, version, cache, templates))
	if err != nil {
		return err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	if ok, why := rt.Templates(); !ok {
		return fmt.Errorf("no gateway templates here: %s", why)
	}
	_, err = benchkit.WaitTemplate(ctx, func() (bool, string) { return rt.TemplateReady(version) })
	return err
}

// copyAgent creates one agent born from the template in a fresh runtime, measures it and
// removes it.
func copyAgent(ctx context.Context, engineDir, version, cache, templates string, idle time.Duration) (sample, error) {
	state, err := os.MkdirTemp("", "agentplane-bench-coldstart-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(state)
	rt, err := local.New(copyOptions(state, engineDir, version, cache, templates))
	if err != nil {
		return sample{}, err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	ag := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "agent"}}
	d := runtime.Desired{EngineVersion: version, GatewayToken: randomToken()}
	dir := rt.AgentDir(ktypes.NamespacedName{Namespace: ag.Namespace, Name: ag.Name})
	defer keepLog("copy", filepath.Join(dir, "gateway.log"))
	var s sample
	self0, start := selfCPU(), time.Now()
	for s.running == 0 || s.ready == 0 {
		o, err := rt.Ensure(ctx, ag, d)
		if err != nil {
			return sample{}, err
		}
		if o.Phase == runtime.PhaseRunning && s.running == 0 {
			if o.Reason != agentsv1.ReasonBornFromGatewayTemplate {
				return sample{}, fmt.Errorf("not born from the template: %s %s", o.Reason, o.Message)
			}
			s.running = time.Since(start).Seconds()
		}
		if o.Endpoint != "" && s.ready == 0 && readyz(ctx, strings.TrimRight(o.Endpoint, "/")+"/readyz") {
			s.ready = time.Since(start).Seconds()
			s.bootCPU = measurePids(cgroupPids(dir)).cpuSec + selfCPU() - self0
		}
		if o.Phase == runtime.PhaseCrashed || time.Since(start) > startLimit {
			return sample{}, fmt.Errorf("gateway not running: %s %s", o.Reason, o.Message)
		}
		if err := benchkit.Sleep(ctx, pollEvery); err != nil {
			return sample{}, err
		}
	}
	if err := benchkit.Sleep(ctx, idle); err != nil {
		return sample{}, err
	}
	s.idle = measurePids(cgroupPids(dir))
	return s, nil
}

// agentCgroup is the dir of the agent's cgroup in the v1 hierarchy or v2 tree named by
// controller ("" for v2), found from its gateway's pid.
func agentCgroup(agentDir, controller string) string {
	b, err := os.ReadFile(filepath.Join(agentDir, "gateway.pid"))
	if err != nil {
		return ""
	}
	cg, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(cg), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == controller {
				return filepath.Join("/sys/fs/cgroup", f[1], f[2])
			}
		}
		if f[1] == "" && controller == "" {
			return filepath.Join("/sys/fs/cgroup", f[2])
		}
	}
	return ""
}

// cgroupPids are the processes in the agent's cgroup.
func cgroupPids(agentDir string) []int {
	d := agentCgroup(agentDir, "memory")
	if d == "" {
		d = agentCgroup(agentDir, "")
	}
	b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// selfCPU is the CPU time (s) of this process and of its children it waited for: the
// runtime's work in the manager and the commands it runs (CRIU's restore).
func selfCPU() float64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	sec := func(ru syscall.Rusage) float64 {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return sec(self) + sec(children)
}
