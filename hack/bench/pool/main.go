// Command pool measures agent creation from a warm GatewayPool against a cold start, in the
// same run, with the real OpenClaw engine (AGENTPLANE_ENGINE_DIR or hack/install-engine.sh):
//
//	go run ./hack/bench/pool -n 5
//
// An embedded platform (local runtime, envtest control plane) first creates n agents cold,
// one after the other: POST /v0/agents until the agent runs (the facade waits for its healthy
// gateway), then one console exec in its workspace; each is deleted before the next. Then it
// creates a GatewayPool of -pool gateways, waits until they are booted, and creates n agents
// the same way, each once the pool is full again (so every create finds a ready gateway).
// It prints each create, the p50 of both and their ratio, and the claim latency the runtime
// measured (the first Ensure's claim of the gateway reserved for the agent: config written,
// token checked, taken over).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
)

func main() {
	n := flag.Int("n", 5, "agents per mode")
	size := flag.Int("pool", 2, "gateways in the pool")
	flag.DurationVar(&settle, "settle", 5*time.Second, "pause once the pool is full before a pooled create (the refilled gateway's start-up work is over)")
	jsonOut = report.Flag()
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if err := run(*n, *size); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// settle is the pause before a pooled create once the pool is full.
var settle time.Duration

// jsonOut is -json: where the results go for `make bench`.
var jsonOut *string

// bench is the running platform and a workspace token.
type bench struct {
	base, tok string
	k8s       client.Client
}

func run(n, size int) error {
	dir, _, err := benchkit.Engine()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := kubeenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	state, err := os.MkdirTemp("", "bench-pool")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	p, err := platform.RunEmbedded(ctx, env.Config, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0", Log: logr.Discard(),
		Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, StateDir: state,
			EngineDirs: map[string]string{engine.PinnedVersion: dir}},
		ProvisionTimeout: 5 * time.Minute,
	})
	if err != nil {
		return err
	}
	defer func() { _ = p.Stop() }()
	b := &bench{base: p.URL, k8s: env.Client}
	if b.tok, err = platform.OwnerToken(ctx, env.Client, p.Signer, "bench", "b", "bench"); err != nil {
		return err
	}

	cold, err := b.cold(n)
	if err != nil {
		return err
	}

	resumes, runningRSS, sleepingRSS, err := b.suspendResume(n)
	if err != nil {
		return err
	}

	pooled, gp, err := b.pooled(ctx, n, size)
	if err != nil {
		return err
	}
	pc, pm := p50(cold), p50(pooled)
	fmt.Printf("local runtime, real openclaw: POST /v0/agents -> running + one console exec\n")
	fmt.Printf("  cold    p50 %8s   min %8s   max %8s\n", pc.Round(time.Millisecond), minOf(cold).Round(time.Millisecond), maxOf(cold).Round(time.Millisecond))
	fmt.Printf("  pooled  p50 %8s   min %8s   max %8s   (%d claimed)\n", pm.Round(time.Millisecond), minOf(pooled).Round(time.Millisecond), maxOf(pooled).Round(time.Millisecond), gp.Status.Claimed)
	fmt.Printf("  ratio cold / pooled p50: %.1f\n", pc.Seconds()/pm.Seconds())
	fmt.Printf("  resume (cold) p50 %8s   min %8s   max %8s   (suspend, then POST .../resume until running + one console exec)\n",
		p50(resumes).Round(time.Millisecond), minOf(resumes).Round(time.Millisecond), maxOf(resumes).Round(time.Millisecond))
	fmt.Printf("  resume from the pool: not offered (OpenClaw reads its whole state dir at boot: a warm gateway cannot take over an existing home)\n")
	fmt.Printf("  RSS of the agent's processes: running %.0f MiB, suspended %.0f MiB\n", runningRSS, sleepingRSS)
	if sum, count := claimLatency(); count > 0 {
		fmt.Printf("  claim (runtime: from the first Ensure until the reserved gateway is the agent's): mean %s over %d claims\n", time.Duration(sum/float64(count)*float64(time.Second)).Round(time.Millisecond), count)
	}
	const cold1 = "cold create (no pool), p50"
	return report.Write(*jsonOut, []report.Result{
		{Bench: "pool", Row: fmt.Sprintf("%d agents from a pool of %d", n, size), Metric: "POST /v0/agents to running + one exec, p50", Value: pm.Seconds(), Unit: "s",
			Baseline: cold1, BaselineValue: pc.Seconds(), Ratio: pc.Seconds() / pm.Seconds(), RatioOf: "cold / pooled"},
		{Bench: "pool", Row: fmt.Sprintf("one agent suspended and resumed %d times", n), Metric: "POST .../resume to running + one exec, p50", Value: p50(resumes).Seconds(), Unit: "s",
			Baseline: cold1, BaselineValue: pc.Seconds(), Ratio: p50(resumes).Seconds() / pc.Seconds(), RatioOf: "resume / cold create"},
		{Bench: "pool", Row: "one agent", Metric: "RSS of its processes, suspended", Value: sleepingRSS, Unit: "MiB",
			Baseline: "the same agent running", BaselineValue: runningRSS, Ratio: sleepingRSS / runningRSS, RatioOf: "suspended / running"},
	})
}

// cold creates n agents one after another, no pool, and returns how long each took.
func (b *bench) cold(n int) ([]time.Duration, error) {
	fmt.Printf("cold: %d agents, no pool\n", n)
	var cold []time.Duration
	for i := range n {
		d, err := b.createAndExec(fmt.Sprintf("cold %d", i))
		if err != nil {
			return nil, err
		}
		cold = append(cold, d)
		time.Sleep(settle) // let the gateway stop before the next one boots
	}
	return cold, nil
}

// pooled creates a GatewayPool of size and then n agents one after another, each once the
// pool is full; it returns how long each took and the pool as it was then.
func (b *bench) pooled(ctx context.Context, n, size int) ([]time.Duration, *agentsv1.GatewayPool, error) {
	gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: agentsv1.GatewayPoolSpec{Replicas: int32(size)}}
	if err := b.k8s.Create(ctx, gp); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := b.waitPool(ctx, int32(size)); err != nil {
		return nil, nil, err
	}
	fmt.Printf("pooled: %d agents, a pool of %d (filled in %s)\n", n, size, time.Since(start).Round(time.Millisecond))
	var pooled []time.Duration
	for i := range n {
		if err := b.waitPool(ctx, int32(size)); err != nil {
			return nil, nil, err
		}
		time.Sleep(settle)
		d, err := b.createAndExec(fmt.Sprintf("pooled %d", i))
		if err != nil {
			return nil, nil, err
		}
		pooled = append(pooled, d)
	}
	if err := b.k8s.Get(ctx, client.ObjectKeyFromObject(gp), gp); err != nil {
		return nil, nil, err
	}
	return pooled, gp, nil
}

// createAndExec creates an agent, runs one console exec in it and deletes it; it returns the
// time from the create request to the exec's answer.
func (b *bench) createAndExec(name string) (time.Duration, error) {
	start := time.Now()
	status, body, err := b.call("POST", "/v0/agents", map[string]string{"name": name})
	if err != nil || status != 201 {
		return 0, fmt.Errorf("create %s: %d %v %s", name, status, err, body)
	}
	created := time.Since(start)
	var out struct{ Agent struct{ ID string } }
	_ = json.Unmarshal(body, &out)
	status, body, err = b.call("POST", "/v0/agents/"+out.Agent.ID+"/console/exec", map[string]string{"command": "pwd"})
	took := time.Since(start)
	if err != nil || status != 200 || !strings.Contains(string(body), "workspace") {
		return 0, fmt.Errorf("exec in %s: %d %v %s", name, status, err, body)
	}
	fmt.Printf("  %-9s running after %8s, exec done after %8s\n", name, created.Round(time.Millisecond), took.Round(time.Millisecond))
	if status, body, err := b.call("DELETE", "/v0/agents/"+out.Agent.ID, nil); err != nil || status != 200 {
		return 0, fmt.Errorf("delete %s: %d %v %s", name, status, err, body)
	}
	return took, nil
}

// suspendResume creates one agent cold, then n times suspends it and resumes it, timing the
// resume (until running, plus one console exec). It returns the resume times and the RSS of
// the agent's processes while it runs and while it is suspended.
func (b *bench) suspendResume(n int) (resumes []time.Duration, running, sleeping float64, err error) {
	status, body, err := b.call("POST", "/v0/agents", map[string]string{"name": "sleeper"})
	if err != nil || status != 201 {
		return nil, 0, 0, fmt.Errorf("create sleeper: %d %v %s", status, err, body)
	}
	var out struct{ Agent struct{ ID string } }
	_ = json.Unmarshal(body, &out)
	id := out.Agent.ID
	fmt.Printf("suspend/resume: one agent, %d times\n", n)
	time.Sleep(settle)
	running = benchkit.AgentRSS(benchkit.HomeOfAgent(id))
	for i := range n {
		if status, body, err := b.call("POST", "/v0/agents/"+id+"/suspend", nil); err != nil || status != 200 {
			return nil, 0, 0, fmt.Errorf("suspend: %d %v %s", status, err, body)
		}
		time.Sleep(settle)
		if r := benchkit.AgentRSS(benchkit.HomeOfAgent(id)); i == 0 || r > sleeping {
			sleeping = r
		}
		start := time.Now()
		if status, body, err := b.call("POST", "/v0/agents/"+id+"/resume", nil); err != nil || status != 200 {
			return nil, 0, 0, fmt.Errorf("resume: %d %v %s", status, err, body)
		}
		if status, body, err := b.call("POST", "/v0/agents/"+id+"/console/exec", map[string]string{"command": "pwd"}); err != nil || status != 200 {
			return nil, 0, 0, fmt.Errorf("exec after resume: %d %v %s", status, err, body)
		}
		d := time.Since(start)
		fmt.Printf("  resume %d  exec done after %8s\n", i, d.Round(time.Millisecond))
		resumes = append(resumes, d)
	}
	if status, body, err := b.call("DELETE", "/v0/agents/"+id, nil); err != nil || status != 200 {
		return nil, 0, 0, fmt.Errorf("delete sleeper: %d %v %s", status, err, body)
	}
	time.Sleep(settle)
	return resumes, running, sleeping, nil
}

// waitPool waits until the pool holds ready gateways.
func (b *bench) waitPool(ctx context.Context, ready int32) error {
	deadline := time.Now().Add(10 * time.Minute)
	gp := &agentsv1.GatewayPool{}
	for time.Now().Before(deadline) {
		if err := b.k8s.Get(ctx, client.ObjectKey{Name: "bench"}, gp); err != nil {
			return err
		}
		if gp.Status.Ready >= ready {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the pool did not fill: %+v", gp.Status)
}

// claimLatency is the sum and count of the claim latency histogram of the platform.
func claimLatency() (float64, uint64) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, 0
	}
	for _, f := range families {
		if f.GetName() == "agentplane_gateway_pool_claim_duration_seconds" {
			for _, m := range f.GetMetric() {
				return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0, 0
}

func (b *bench) call(method, path string, body any) (int, []byte, error) {
	return benchkit.Client{Base: b.base, Token: b.tok}.Call(method, path, body)
}

func sorted(ds []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

func p50(ds []time.Duration) time.Duration   { return sorted(ds)[len(ds)/2] }
func minOf(ds []time.Duration) time.Duration { return sorted(ds)[0] }
func maxOf(ds []time.Duration) time.Duration { return sorted(ds)[len(ds)-1] }
