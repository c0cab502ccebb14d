// Command agents measures agent provisioning.
//
//	go run ./hack/bench/agents -mode local -n 5     # POST /v0/agents until the real gateway is healthy
//	go run ./hack/bench/agents -mode kube -n 500    # kube-runtime reconcile of n Agents on envtest
//	go run ./hack/bench/agents -mode kube -n 10000 -workspaces 100   # spread over 100 workspaces
//	sudo go run ./hack/bench/agents -mode kwok -n 1000 -nodes 50   # n Agents running on KWOK nodes
//	go run ./hack/bench/agents -mode cost -n 500    # what each kind of the manager's requests costs
//	go run ./hack/bench/agents -mode kube -n 500 -json out.json   # the results as JSON too
//
// local: p50/p90 of n sequential creates with the real OpenClaw engine (AGENTPLANE_ENGINE_DIR or
// hack/install-engine.sh), against the contract's reference of about 30 s; one gateway at a
// time (each is deleted before the next create).
//
// kube: wall time until every Agent's owned objects exist, against a baseline measured in the
// same run (the same objects built by the same builders and created directly by one client),
// the time per agent of the last tenth against the first (flat cost: near 1), the manager's
// API requests per agent and the process RSS before and after. Its last line is a row of
// docs/BENCHMARKS.md's table. The manager in the benchmark process runs with the client-side
// limit `agentplane manager` ships with (-kube-api-qps, -kube-api-burst: other flag values),
// not with the control plane's client config; the output names the settings.
//
// cost: n requests of each kind the manager makes per agent (finalizer PUT, first status PATCH,
// gateway-token Secret, StatefulSet), timed with 8 writers against n Agent creates.
//
// -json FILE writes the results as a JSON array, one object per metric: {"bench", "row",
// "metric", "value", "unit", "baseline", "baseline_value", "ratio"}.
//
// kwok: a local cluster (root; make envtest-assets cluster-binaries) with -nodes simulated
// nodes; wall time until n Agents are running (their pods Ready on the simulated nodes),
// against the same objects created directly until their pods are Ready, in the same run;
// API requests per agent and RSS as for kube.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/tenancy"
	"github.com/agentplane/agentplane/internal/testenv"
)

func main() {
	mode := flag.String("mode", "local", "local, kube, kwok or cost")
	n := flag.Int("n", 5, "agents")
	nodes := flag.Int("nodes", 50, "simulated nodes (kwok)")
	workspaces := flag.Int("workspaces", 1, "kube mode: workspaces the agents are spread over")
	flag.IntVar(&agentWorkers, "agent-workers", platform.DefaultAgentWorkers, "kube and kwok modes: the manager's --agent-workers (default: the manager's own)")
	qps := flag.Float64("kube-api-qps", float64(platform.DefaultAPIQPS), "kube and kwok modes: the manager's --kube-api-qps (default: the manager's own)")
	flag.IntVar(&apiBurst, "kube-api-burst", platform.DefaultAPIBurst, "kube and kwok modes: the manager's --kube-api-burst")
	timeout := flag.Duration("timeout", 30*time.Minute, "how long each kwok run may wait before it reports how far it got")
	jsonFile := report.Flag()
	flag.StringVar(&heapProfile, "heapprofile", "", "kube mode: write a heap profile here once every StatefulSet exists (go tool pprof -top -sample_index=inuse_space FILE)")
	flag.Parse()
	apiQPS = float32(*qps)
	ctrllog.SetLogger(logr.Discard())
	var err error
	switch *mode {
	case "local":
		err = benchLocal(*n)
	case "kube":
		err = benchKube(*n, *workspaces, *timeout)
	case "kwok":
		err = benchKwok(*n, *nodes, *timeout)
	case "cost":
		err = benchCost(*n)
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	if err == nil {
		err = report.Write(*jsonFile, jsonRows)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// agentWorkers is the platform's AgentWorkers: by default the manager's (not the embedded
// platform's 4).
var agentWorkers int

// apiQPS and apiBurst are the manager's client-side limit to the API server, by default the
// one `agentplane manager` ships with (not the control plane's client config: envtest's is
// 1,000 QPS).
var (
	apiQPS   float32
	apiBurst int
)

// clientSettings names the manager's client-side limit, as the output says it.
func clientSettings() string {
	cfg := platform.ClientConfig(&rest.Config{}, apiQPS, apiBurst)
	if cfg.QPS < 0 {
		return fmt.Sprintf("manager --kube-api-qps %g --kube-api-burst %d --agent-workers %d: no client-side limit", apiQPS, apiBurst, agentWorkers)
	}
	return fmt.Sprintf("manager --kube-api-qps %g --kube-api-burst %d --agent-workers %d: client-side limit %g QPS, burst %d", apiQPS, apiBurst, agentWorkers, cfg.QPS, cfg.Burst)
}

// flagsLabel names the manager's client settings in a JSON row: "shipped flags" for the
// defaults of `agentplane manager`, else the flags.
func flagsLabel() string {
	if apiQPS == float32(platform.DefaultAPIQPS) && apiBurst == platform.DefaultAPIBurst && agentWorkers == platform.DefaultAgentWorkers {
		return "shipped flags"
	}
	return fmt.Sprintf("--kube-api-qps %g --kube-api-burst %d --agent-workers %d", apiQPS, apiBurst, agentWorkers)
}

// heapProfile is where -heapprofile writes the process's heap once the agents' objects exist.
var heapProfile string

// writeHeapProfile writes the live heap (after a GC) to heapProfile, when it is set.
func writeHeapProfile() error {
	if heapProfile == "" {
		return nil
	}
	f, err := os.Create(heapProfile)
	if err != nil {
		return err
	}
	defer f.Close()
	goruntime.GC()
	return pprof.WriteHeapProfile(f)
}

func engineDir() (string, error) {
	if d := os.Getenv("AGENTPLANE_ENGINE_DIR"); d != "" {
		return d, nil
	}
	out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "install-engine.sh")).Output()
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

func benchLocal(n int) error {
	dir, err := engineDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	state, err := os.MkdirTemp("", "bench-agents")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	ready := make(chan string, 1)
	p, err := platform.New(ctx, env.Config, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0", Log: logr.Discard(),
		APIReady: func(a string) { ready <- a },
		Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, StateDir: state,
			EngineDirs: map[string]string{"2026.9.6": dir}},
		ProvisionTimeout: 5 * time.Minute,
	})
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- p.Start(ctx) }()
	base := "http://" + <-ready
	if err := tenancy.EnsureWorkspace(ctx, env.Client, &agentsv1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec:       agentsv1.WorkspaceSpec{Members: []agentsv1.WorkspaceMember{{UserID: "b", Role: agentsv1.RoleOwner}}},
	}); err != nil {
		return err
	}
	tok, _, err := auth.CreateKey(ctx, env.Client, p.Signer, auth.KeyRequest{Workspace: "bench", UserID: "b", Scopes: []string{auth.ScopeAll}})
	if err != nil {
		return err
	}
	var took []time.Duration
	for i := range n {
		start := time.Now()
		status, body, err := post(base+"/v0/agents", tok, map[string]string{"name": fmt.Sprintf("bench %d", i)})
		if err != nil || status != 201 {
			return fmt.Errorf("create %d: %d %v %s", i, status, err, body)
		}
		took = append(took, time.Since(start))
		fmt.Printf("  agent %d running after %s\n", i+1, took[i].Round(time.Millisecond))
		var out struct{ Agent struct{ ID string } }
		_ = json.Unmarshal(body, &out)
		req, _ := http.NewRequest("DELETE", base+"/v0/agents/"+out.Agent.ID, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		time.Sleep(3 * time.Second) // let the gateway stop before the next one boots
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	p50 := took[len(took)/2]
	fmt.Printf("local runtime, POST /v0/agents -> gateway healthy, %d agents, real openclaw\n", n)
	fmt.Printf("  p50 %s   min %s   max %s\n", p50.Round(time.Millisecond), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	fmt.Printf("  ratio reference (30 s) / p50: %.2f\n", (30*time.Second).Seconds()/p50.Seconds())
	cancel()
	<-errc
	return nil
}

func post(url, tok string, body any) (int, []byte, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), nil
}
