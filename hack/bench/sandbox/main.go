// Command sandbox measures what the local runtime's sandbox costs an agent, against the same
// runtime without it, in the same run, with the real OpenClaw engine (AGENTPLANE_ENGINE_DIR or
// hack/install-engine.sh) and the runtime's shipped defaults:
//
//	go run ./hack/bench/sandbox -n 3
//
// Each round starts one agent's gateway unsandboxed (--sandbox=off) and one sandboxed
// (--sandbox=auto, which must find bubblewrap), in alternating order, each from a fresh state
// dir: cold create is the time from Ensure to the gateway's first healthy answer; idle RSS is
// the resident memory of every process of the agent (bwrap's two included), summed, after
// -idle of quiet; the round trip is the median of 200 GETs of the gateway's /healthz at its
// endpoint, each on a new connection (as root a sandboxed gateway has a network namespace of
// its own, reached through the manager's door: this is what the door costs). It prints each
// run, the medians and the sandboxed/unsandboxed ratios.
//
// Unsandboxed gateways share the host's warm Node compile cache in /tmp; sandboxed ones share
// the runtime's read-only one, which a long-running manager warms once per engine: here one
// CompileCacheDir serves every round and is warmed (WarmCompileCache) before the first.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

func main() {
	n := flag.Int("n", 3, "rounds (one unsandboxed and one sandboxed agent each)")
	idle := flag.Duration("idle", 30*time.Second, "quiet time before the idle RSS is read")
	jsonOut = report.Flag()
	flag.Parse()
	// Ctrl-C ends the run through each runtime's Shutdown: no gateway is left behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type sample struct{ create, rssMiB, rttMs float64 }

// jsonOut is -json: where the results go for `make bench`.
var jsonOut *string

func run(ctx context.Context, n int, idle time.Duration) error {
	engineDir, version, err := benchkit.Engine()
	if err != nil {
		return err
	}
	fmt.Printf("engine %s in %s; %d rounds, idle %s\n", version, engineDir, n, idle)
	cache, err := os.MkdirTemp("", "agentplane-bench-compile-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	got := map[string][]sample{}
	for i := range n {
		order := []string{local.SandboxOff, local.SandboxAuto}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, mode := range order {
			s, err := once(ctx, mode, engineDir, version, cache, idle)
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			fmt.Printf("round %d  sandbox=%-4s  create %.2f s  idle RSS %.0f MiB  GET /healthz p50 %.3f ms\n", i+1, mode, s.create, s.rssMiB, s.rttMs)
			got[mode] = append(got[mode], s)
		}
	}
	off, on := medians(got[local.SandboxOff]), medians(got[local.SandboxAuto])
	fmt.Printf("\nmedian  unsandboxed: create %.2f s, idle RSS %.0f MiB, GET /healthz %.3f ms\n", off.create, off.rssMiB, off.rttMs)
	fmt.Printf("median  sandboxed:   create %.2f s, idle RSS %.0f MiB, GET /healthz %.3f ms\n", on.create, on.rssMiB, on.rttMs)
	fmt.Printf("ratio sandboxed/unsandboxed: create %.3f, idle RSS %.3f, GET /healthz %.3f\n", on.create/off.create, on.rssMiB/off.rssMiB, on.rttMs/off.rttMs)
	row := fmt.Sprintf("median of %d rounds, engine %s", n, version)
	const base, of = "the same runtime with --sandbox=off", "sandboxed / unsandboxed"
	return report.Write(*jsonOut, []report.Result{
		{Bench: "sandbox", Row: row, Metric: "cold create (Ensure to healthy)", Value: on.create, Unit: "s", Baseline: base, BaselineValue: off.create, Ratio: on.create / off.create, RatioOf: of},
		{Bench: "sandbox", Row: row, Metric: fmt.Sprintf("idle RSS after %s", idle), Value: on.rssMiB, Unit: "MiB", Baseline: base, BaselineValue: off.rssMiB, Ratio: on.rssMiB / off.rssMiB, RatioOf: of},
		{Bench: "sandbox", Row: row, Metric: fmt.Sprintf("GET /healthz at the endpoint, p50 of %d (new connection each)", rttRequests), Value: on.rttMs, Unit: "ms", Baseline: base, BaselineValue: off.rttMs, Ratio: on.rttMs / off.rttMs, RatioOf: of},
	})
}

// once starts one agent in a fresh runtime with the sandbox mode, measures it and removes it.
func once(ctx context.Context, mode, engineDir, version, cache string, idle time.Duration) (sample, error) {
	state, err := os.MkdirTemp("", "agentplane-bench-sandbox-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(state)
	rt, err := local.New(local.Options{
		StateDir: state, Engine: openclaw.New(), EngineDirs: map[string]string{version: engineDir},
		Log: logr.Discard(), Sandbox: mode, CompileCacheDir: cache,
	})
	if err != nil {
		return sample{}, err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	if ok, why := rt.Sandboxed(); ok != (mode == local.SandboxAuto) {
		return sample{}, fmt.Errorf("sandboxed = %v (%s)", ok, why)
	}
	if err := rt.WarmCompileCache(ctx, version); err != nil {
		return sample{}, err
	}
	ag := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "agent"}}
	d := runtime.Desired{EngineVersion: version, GatewayToken: "bench-token-0123456789abcdef"}
	start := time.Now()
	for {
		o, err := rt.Ensure(ctx, ag, d)
		if err != nil {
			return sample{}, err
		}
		if o.Phase == runtime.PhaseRunning {
			break
		}
		if o.Phase == runtime.PhaseCrashed || time.Since(start) > 3*time.Minute {
			return sample{}, fmt.Errorf("gateway not running: %s %s", o.Reason, o.Message)
		}
		if benchkit.Sleep(ctx, 50*time.Millisecond) != nil {
			return sample{}, ctx.Err()
		}
	}
	created := time.Since(start).Seconds()
	if err := benchkit.Sleep(ctx, idle); err != nil {
		return sample{}, err
	}
	home := filepath.Join(rt.AgentDir(ktypes.NamespacedName{Namespace: ag.Namespace, Name: ag.Name}), "home")
	rss := benchkit.AgentRSS(benchkit.HomeIs(home))
	o, err := rt.Ensure(ctx, ag, d)
	if err != nil {
		return sample{}, err
	}
	rtt, err := roundTrip(ctx, o.Endpoint+"/healthz")
	if err != nil {
		return sample{}, err
	}
	return sample{create: created, rssMiB: rss, rttMs: rtt}, nil
}

// rttRequests is how many requests roundTrip times.
const rttRequests = 200

// roundTrip is the median time in ms of rttRequests GETs of url, each on a new connection (as
// root a sandboxed gateway is reached through the manager's door into its network namespace:
// a new connection is a new dial inside it).
func roundTrip(ctx context.Context, url string) (float64, error) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}, Timeout: 10 * time.Second}
	times := make([]float64, 0, rttRequests)
	for range rttRequests {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
		}
		times = append(times, float64(time.Since(start).Microseconds())/1000)
	}
	return benchkit.Median(times, func(x float64) float64 { return x }), nil
}

func medians(s []sample) sample {
	med := func(f func(sample) float64) float64 { return benchkit.Median(s, f) }
	return sample{create: med(func(x sample) float64 { return x.create }), rssMiB: med(func(x sample) float64 { return x.rssMiB }), rttMs: med(func(x sample) float64 { return x.rttMs })}
}
