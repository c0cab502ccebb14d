// Command agents measures agent provisioning.
//
//	go run ./hack/bench/agents -mode kube -n 500    # kube-runtime reconcile of n Agents on envtest
//	go run ./hack/bench/agents -mode kube -n 10000 -workspaces 100   # spread over 100 workspaces
//	sudo go run ./hack/bench/agents -mode kwok -n 1000 -nodes 50   # n Agents running on KWOK nodes
//	go run ./hack/bench/agents -mode cost -n 500    # what each kind of the manager's requests costs
//	go run ./hack/bench/agents -mode kube -n 500 -json out.json   # the results as JSON too
//	go run ./hack/bench/agents -mode peer -peer-src DIR -n 500   # the peer operator against agentplane
//
// (An agent's start with the real engine is hack/bench/coldstart's, against the bare engine in
// the same run; the local mode this program had compared it with a constant.)
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
// peer: openclaw-rocks/openclaw-operator's manager, built from a checkout of its source
// (-peer-src) and run as its own process with its binary's default flags and a kubeconfig,
// against agentplane's manager as mode kube runs it, on one envtest control plane in the same
// run: n OpenClawInstances until n StatefulSets exist, then n Agents until n StatefulSets
// exist; the two wall times and their ratio peer/agentplane. Not in `make bench` (CI has no
// copy of the peer's source).
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
	"flag"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/platform"
)

func main() {
	mode := flag.String("mode", "kube", "kube, kwok, cost or peer")
	peerSrc := flag.String("peer-src", "", "peer mode: a checkout of openclaw-rocks/openclaw-operator's source (its manager is built from it)")
	n := flag.Int("n", 500, "agents")
	nodes := flag.Int("nodes", 50, "simulated nodes (kwok)")
	workspaces := flag.Int("workspaces", 1, "kube mode: workspaces the agents are spread over")
	flag.IntVar(&agentWorkers, "agent-workers", platform.DefaultAgentWorkers, "kube and kwok modes: the manager's --agent-workers (default: the manager's own)")
	qps := flag.Float64("kube-api-qps", float64(platform.DefaultAPIQPS), "kube and kwok modes: the manager's --kube-api-qps (default: the manager's own)")
	flag.IntVar(&apiBurst, "kube-api-burst", platform.DefaultAPIBurst, "kube and kwok modes: the manager's --kube-api-burst")
	timeout := flag.Duration("timeout", 30*time.Minute, "how long each kwok run (and the peer's, peer mode) may wait before it reports how far it got")
	jsonFile := report.Flag()
	flag.StringVar(&heapProfile, "heapprofile", "", "kube mode: write a heap profile here once every StatefulSet exists (go tool pprof -top -sample_index=inuse_space FILE)")
	flag.Parse()
	apiQPS = float32(*qps)
	ctrllog.SetLogger(logr.Discard())
	var err error
	switch *mode {
	case "kube":
		err = benchKube(*n, *workspaces, *timeout)
	case "kwok":
		err = benchKwok(*n, *nodes, *timeout)
	case "cost":
		err = benchCost(*n)
	case "peer":
		if *peerSrc == "" {
			err = fmt.Errorf("-mode peer needs -peer-src")
			break
		}
		err = benchPeer(*n, *peerSrc, *timeout)
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
