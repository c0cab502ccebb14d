// Command coldstart compares an agent's gateway with the bare engine, in one run, with the real
// OpenClaw engine (AGENTPLANE_ENGINE_DIR or hack/install-engine.sh) and shipped defaults:
//
//	go run ./hack/bench/coldstart -n 3 -idle 60s -json coldstart.json
//
// Each round measures, each side first in turn:
//
//   - bare: the engine started by hand with its defaults (bare.go): the time from exec to the
//     first {"ready":true} of /readyz;
//   - agent: an agent on the local runtime as the manager ships it (real engine, sandbox auto,
//     every default of local.Options, the engine's compile cache warmed once before the first
//     round as a long-running manager has it): the time from the first Ensure to the runtime's
//     Running (create-to-running: what the REST create waits for) and to /readyz answering
//     {"ready":true}, as for the bare engine. This is a cold boot: the binaries give a new
//     agent with secrets of its own one, and every agent where templates are off;
//   - copy (-templates, the default): an agent born from its engine's template, as the
//     binaries give every other new agent as root with CRIU and the reseed addon (copy.go):
//     the same times, and its CPU time as its processes' (found by its cgroup) plus this
//     process's and its children's during the create (the runtime's work, CRIU's restore).
//
// After -idle of quiet it reads each one's idle usage: RSS and PSS summed over every process
// that carries its marker in its environment (gateway, Node child processes, bwrap's two), and
// the CPU time its processes used until ready (less sensitive to a busy host than wall time).
// It prints every run, the medians and the ratios agent/bare, and with -json writes the
// medians as report.Result rows (make bench).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

const (
	pollEvery  = 50 * time.Millisecond
	startLimit = 3 * time.Minute
)

var (
	keepLogs string // -logs
	trace    bool   // -trace
	started  int    // starts so far, to name the logs kept
	withCopy bool   // -templates
)

// traceEnv is the engine's startup trace switch when -trace is set.
func traceEnv() map[string]string {
	if !trace {
		return nil
	}
	return map[string]string{"OPENCLAW_GATEWAY_STARTUP_TRACE": "1"}
}

// keepLog copies a start's gateway log into the -logs dir.
func keepLog(side, path string) {
	if keepLogs == "" {
		return
	}
	started++
	if b, err := os.ReadFile(path); err == nil {
		_ = os.MkdirAll(keepLogs, 0o755)
		_ = os.WriteFile(filepath.Join(keepLogs, fmt.Sprintf("%02d-%s.log", started, side)), b, 0o644)
	}
}

func main() {
	n := flag.Int("n", 3, "rounds (one bare engine and one agent each, in alternating order)")
	idle := flag.Duration("idle", 60*time.Second, "quiet time before the idle usage is read")
	jsonOut := report.Flag()
	flag.BoolVar(&withCopy, "templates", true, "also measure an agent born from its engine's template (root, CRIU and the reseed addon; the binaries' default)")
	flag.StringVar(&keepLogs, "logs", "", "copy each start's gateway log into this dir")
	flag.BoolVar(&trace, "trace", false, "run both with the engine's startup trace (OPENCLAW_GATEWAY_STARTUP_TRACE=1)")
	flag.Parse()
	// Ctrl-C ends the run through the stops and the runtime's Shutdown: nothing is left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *idle, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// sample is one start: seconds to ready (bare: /readyz; agent: /readyz, and Running), the CPU
// its processes used until then, and what they hold after the idle time.
type sample struct {
	ready, running, bootCPU float64
	idle                    usage
}

func run(ctx context.Context, n int, idle time.Duration, jsonOut string) error {
	engineDir, version, err := benchkit.Engine()
	if err != nil {
		return err
	}
	fmt.Printf("engine %s in %s; %d rounds, idle %s; load %s\n", version, engineDir, n, idle, loadavg())
	cache, err := os.MkdirTemp("", "agentplane-bench-coldstart-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	// Both sides start with a warm compile cache: the bare engine's in the host's /tmp (one
	// untimed start), the agent's sealed one (as a manager warms it once per engine).
	fmt.Println("warming the bare engine's compile cache (one untimed start)...")
	if _, err := bare(ctx, engineDir, 0); err != nil {
		return fmt.Errorf("bare warm-up: %w", err)
	}
	templates, err := os.MkdirTemp("", "agentplane-bench-coldstart-templates-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(templates)
	sides := []string{"bare", "agent"}
	if withCopy {
		fmt.Println("making the engine's template gateway (untimed, once, as a manager does per engine)...")
		if err := makeTemplate(ctx, engineDir, version, cache, templates); err != nil {
			return fmt.Errorf("template: %w", err)
		}
		sides = append(sides, "copy")
	}
	got := map[string][]sample{}
	for i := range n {
		for k := range sides {
			side := sides[(i+k)%len(sides)] // each side first in turn
			var s sample
			switch side {
			case "bare":
				s, err = bare(ctx, engineDir, idle)
			case "agent":
				s, err = agent(ctx, engineDir, version, cache, idle)
			default:
				s, err = copyAgent(ctx, engineDir, version, cache, templates, idle)
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, side, err)
			}
			fmt.Printf("round %d  %-5s  ready %.2f s  running %.2f s  boot CPU %.2f s  idle RSS %.0f MiB  PSS %.0f MiB  (%d procs; load %s)\n",
				i+1, side, s.ready, s.running, s.bootCPU, s.idle.rssMiB, s.idle.pssMiB, s.idle.procs, loadavg())
			got[side] = append(got[side], s)
		}
	}
	rows := results(n, got["bare"], got["agent"], agentRow(n), "target <= 0.75", "target <= 0.5")
	if withCopy {
		rows = append(rows, results(n, got["bare"], got["copy"], copyRow(n), "target <= 0.2", "target <= 0.5")...)
	}
	fmt.Println()
	for _, r := range rows {
		fmt.Printf("median  %-38s agent %8.2f %-3s  bare %8.2f  ratio %.3f\n", r.Metric, r.Value, r.Unit, r.BaselineValue, r.Ratio)
	}
	return report.Write(jsonOut, rows)
}

// results is the medians, each agent metric against the bare engine's counterpart (the
// agent's create-to-running against the bare engine's time to /readyz, as the issue states
// its target).
func results(n int, bares, agents []sample, row, createTarget, rssTarget string) []report.Result {
	type metric struct {
		name, unit, base, of string
		get, baseGet         func(sample) float64
	}
	ready := func(s sample) float64 { return s.ready }
	cpu := func(s sample) float64 { return s.bootCPU }
	rss := func(s sample) float64 { return s.idle.rssMiB }
	pss := func(s sample) float64 { return s.idle.pssMiB }
	ms := []metric{
		{"create to running (bare: boot to /readyz)", "s", "the bare engine's boot to /readyz", "agent / bare; " + createTarget, func(s sample) float64 { return s.running }, ready},
		{"boot to /readyz", "s", "the bare engine's", "agent / bare", ready, ready},
		{"CPU time until ready", "s", "the bare engine's", "agent / bare", cpu, cpu},
		{"idle RSS, every process", "MiB", "the bare engine's", "agent / bare; " + rssTarget, rss, rss},
		{"idle PSS, every process", "MiB", "the bare engine's", "agent / bare", pss, pss},
	}
	var rows []report.Result
	for _, m := range ms {
		v, base := benchkit.Median(agents, m.get), benchkit.Median(bares, m.baseGet)
		r := report.Result{Bench: "coldstart", Row: row, Metric: m.name, Value: v, Unit: m.unit, Baseline: m.base, BaselineValue: base, RatioOf: m.of}
		if base > 0 {
			r.Ratio = v / base
		}
		rows = append(rows, r)
	}
	return rows
}

// agent creates one agent in a fresh local runtime with shipped defaults, measures it and
// removes it (Shutdown stops its gateway).
func agent(ctx context.Context, engineDir, version, cache string, idle time.Duration) (sample, error) {
	state, err := os.MkdirTemp("", "agentplane-bench-coldstart-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(state)
	rt, err := local.New(local.Options{
		StateDir: state, Engine: openclaw.New(), EngineDirs: map[string]string{version: engineDir},
		Log: logr.Discard(), Sandbox: local.SandboxAuto, CompileCacheDir: cache,
	})
	if err != nil {
		return sample{}, err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	if ok, why := rt.Sandboxed(); !ok {
		return sample{}, fmt.Errorf("not sandboxed: %s", why)
	}
	if err := rt.WarmCompileCache(ctx, version); err != nil {
		return sample{}, err
	}
	ag := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "agent"}}
	d := runtime.Desired{EngineVersion: version, GatewayToken: randomToken(), Env: traceEnv()}
	dir := rt.AgentDir(ktypes.NamespacedName{Namespace: ag.Namespace, Name: ag.Name})
	defer keepLog("agent", filepath.Join(dir, "gateway.log"))
	home := filepath.Join(dir, "home")
	marker := local.MarkerEnv + "=" + home
	var s sample
	start := time.Now()
	for s.running == 0 || s.ready == 0 {
		o, err := rt.Ensure(ctx, ag, d)
		if err != nil {
			return sample{}, err
		}
		if o.Phase == runtime.PhaseRunning && s.running == 0 {
			s.running = time.Since(start).Seconds()
		}
		if o.Endpoint != "" && s.ready == 0 && readyz(ctx, strings.TrimRight(o.Endpoint, "/")+"/readyz") {
			s.ready, s.bootCPU = time.Since(start).Seconds(), measure(marker).cpuSec
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
	s.idle = measure(marker)
	return s, nil
}

// agentRow and copyRow name the rows of a cold agent and of one born from the template.
func agentRow(n int) string {
	return fmt.Sprintf("agent on the local runtime vs `openclaw gateway` by hand, median of %d", n)
}

func copyRow(n int) string {
	return fmt.Sprintf("agent born from its engine's template vs `openclaw gateway` by hand, median of %d", n)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
