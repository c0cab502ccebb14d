// Command soak runs idle agents and a busy one on the local runtime with the real engine for a
// long while and reports what their memory does: growth, OOM kills, agents that stopped, and
// how many idle agents the machine's available memory holds at the measured cost per agent.
//
//	go run ./hack/bench/soak -idle-agents 20 -duration 1h
//
// It starts the envtest control plane and an embedded platform (local runtime, the shipped
// defaults: sandbox auto, the engine from AGENTPLANE_ENGINE_DIR or hack/install-engine.sh),
// creates the agents one after another through POST /v0/agents, lets them settle, then for
// -duration keeps the busy agent working (a console exec writing, hashing and removing 1 MiB
// in its home, and a config read, every 2 s) and samples every -sample: each agent's RSS (all
// of its processes), the kernel's oom_kill counter (/proc/vmstat) and every agent's phase.
// The baseline of growth is the first sample after the settle, in the same run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
)

func main() {
	idle := flag.Int("idle-agents", 20, "idle agents (one more is busy)")
	duration := flag.Duration("duration", time.Hour, "how long the soak lasts once every agent runs and has settled")
	sample := flag.Duration("sample", time.Minute, "time between samples")
	settle := flag.Duration("settle", 2*time.Minute, "quiet time after the last create before the first sample")
	jsonOut := report.Flag()
	flag.Parse()
	benchkit.Main(*jsonOut, func(ctx context.Context) ([]report.Result, error) {
		return run(ctx, *idle, *duration, *sample, *settle)
	})
}

// snapshot is one sample: RSS per agent id (MiB), the oom_kill counter, agents not running.
type snapshot struct {
	at         time.Duration
	rss        map[string]float64
	oomKills   int64
	notRunning []string
}

func run(ctx context.Context, idle int, duration, every, settle time.Duration) ([]report.Result, error) {
	dir, version, err := benchkit.Engine()
	if err != nil {
		return nil, err
	}
	env, err := kubeenv.Start()
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	state, err := os.MkdirTemp("", "bench-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(state)
	p, err := platform.RunEmbedded(ctx, env.Config, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0", Log: logr.Discard(),
		Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, StateDir: state,
			EngineDirs: map[string]string{version: dir}},
		ProvisionTimeout: 5 * time.Minute,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Stop() }()
	tok, err := platform.OwnerToken(ctx, env.Client, p.Signer, "soak", "s", "soak")
	if err != nil {
		return nil, err
	}
	c := &caller{base: p.URL, tok: tok}

	availBefore := benchkit.MemAvailableMiB()
	var ids []string
	for i := range idle + 1 {
		start := time.Now()
		id, err := c.create(fmt.Sprintf("soak %d", i))
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		fmt.Printf("agent %2d %s running after %s\n", i, id, time.Since(start).Round(time.Millisecond))
	}
	busy := ids[len(ids)-1]
	fmt.Printf("%d idle agents and a busy one (%s); settling %s\n", idle, busy, settle)
	if err := benchkit.Sleep(ctx, settle); err != nil {
		return nil, err
	}
	availAfter := benchkit.MemAvailableMiB()

	work, stopWork := context.WithCancel(ctx)
	workErrs := make(chan error, 1)
	go func() { workErrs <- benchkit.KeepBusy(work, benchkit.Client{Base: c.base, Token: c.tok}, busy) }()
	var samples []snapshot
	start := time.Now()
	for {
		s := c.sample(ids, time.Since(start))
		samples = append(samples, s)
		idleRSS := make([]float64, 0, idle)
		for _, id := range ids[:idle] {
			idleRSS = append(idleRSS, s.rss[id])
		}
		fmt.Printf("%8s  idle median %6.0f MiB  busy %6.0f MiB  oom_kill %d  not running %v\n",
			s.at.Round(time.Second), benchkit.Median(idleRSS, func(x float64) float64 { return x }), s.rss[busy], s.oomKills, s.notRunning)
		if time.Since(start) >= duration {
			break
		}
		if err := benchkit.Sleep(ctx, every); err != nil {
			stopWork()
			return nil, err
		}
	}
	stopWork()
	busyErr := <-workErrs
	return results(ids, busy, samples, availBefore, availAfter, duration, busyErr)
}

// results turns the samples into the report's rows.
func results(ids []string, busy string, samples []snapshot, availBefore, availAfter float64, duration time.Duration, busyErr error) ([]report.Result, error) {
	first, last := samples[0], samples[len(samples)-1]
	idle := len(ids) - 1
	med := func(s snapshot) float64 {
		var v []float64
		for _, id := range ids[:idle] {
			v = append(v, s.rss[id])
		}
		return benchkit.Median(v, func(x float64) float64 { return x })
	}
	peak := 0.0
	for _, s := range samples {
		peak = max(peak, s.rss[busy])
	}
	row := fmt.Sprintf("%d idle agents and a busy one, %s", idle, duration)
	perAgent := (availBefore - availAfter) / float64(len(ids))
	rs := []report.Result{
		{Row: row, Metric: "idle agent RSS at the end, median", Value: med(last), Unit: "MiB",
			Baseline: "at the first sample", BaselineValue: med(first), Ratio: med(last) / med(first), RatioOf: "end / start; target: no growth"},
		{Row: row, Metric: "busy agent RSS at the end", Value: last.rss[busy], Unit: "MiB",
			Baseline: "at the first sample", BaselineValue: first.rss[busy], Ratio: last.rss[busy] / first.rss[busy], RatioOf: "end / start"},
		{Row: row, Metric: "busy agent RSS, peak", Value: peak, Unit: "MiB"},
		{Row: row, Metric: "OOM kills during the soak", Value: float64(last.oomKills - first.oomKills)},
		{Row: row, Metric: "agents not running at the end", Value: float64(len(last.notRunning))},
		{Row: "density (local runtime)", Metric: "memory per agent, from the machine's available memory before and after", Value: perAgent, Unit: "MiB"},
		{Row: "density (local runtime)", Metric: "idle agents the available memory holds at that cost", Value: float64(int(availBefore / perAgent)),
			Baseline: "agents the same memory holds at the idle agent's own RSS", BaselineValue: float64(int(availBefore / med(first))),
			Ratio: perAgent / med(first), RatioOf: "machine cost / agent RSS per agent"},
	}
	for i := range rs {
		rs[i].Bench = "soak"
	}
	if busyErr != nil {
		return rs, fmt.Errorf("the busy agent's work failed: %w", busyErr)
	}
	return rs, nil
}

type caller struct{ base, tok string }

func (c *caller) create(name string) (string, error) {
	status, body, err := c.call("POST", "/v0/agents", map[string]string{"name": name})
	if err != nil || status != 201 {
		return "", fmt.Errorf("create %s: %d %v %s", name, status, err, body)
	}
	var out struct{ Agent struct{ ID, Status string } }
	if err := json.Unmarshal(body, &out); err != nil {
		return "", err
	}
	return out.Agent.ID, nil
}

func (c *caller) sample(ids []string, at time.Duration) snapshot {
	s := snapshot{at: at, rss: map[string]float64{}, oomKills: oomKills()}
	for _, id := range ids {
		s.rss[id] = benchkit.AgentRSS(benchkit.HomeOfAgent(id))
		status, body, err := c.call("GET", "/v0/agents/"+id, nil)
		var out struct{ Agent struct{ Status string } }
		if err != nil || status != 200 || json.Unmarshal(body, &out) != nil || out.Agent.Status != "running" {
			s.notRunning = append(s.notRunning, id)
		}
	}
	return s
}

func (c *caller) call(method, path string, body any) (int, []byte, error) {
	return benchkit.Client{Base: c.base, Token: c.tok}.Call(method, path, body)
}

// oomKills is the kernel's count of OOM kills since boot (/proc/vmstat oom_kill).
func oomKills() int64 {
	return benchkit.ProcField("/proc/vmstat", "oom_kill ")
}
