package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/test/e2e"
)

// memoryAgents is how many idle agents BenchmarkRealNodeMemory runs at once (an idle gateway
// holds most of a GiB).
const memoryAgents = 3

// BenchmarkRealNodeMemory measures what an idle agent costs the real node: its pod's working
// set and RSS as the kubelet's stats summary reports them (what metrics-server and the
// eviction manager read), its containerd shim, and its share of the kubelet's and
// containerd's growth; against the same figures of a bare pod of the same template measured
// in the same run (what the engine takes without the platform).
//
//	go test -run '^$' -bench BenchmarkRealNodeMemory -benchtime 1x ./test/e2e/realnode/
func BenchmarkRealNodeMemory(b *testing.B) {
	if !testenv.RealNode(b) {
		return
	}
	p := e2e.StartDev(b, e2e.EngineDir(b), "--runtime", "kube")
	b.Cleanup(p.Stop)
	k8s := p.KubeClient()
	cs := clientset(b, p)
	ctx := context.Background()
	idle := map[string]float64{"kubelet": procRSS(b, "kubelet"), "containerd": procRSS(b, "containerd")}
	for i := 0; i < b.N; i++ {
		var ids []string
		for a := 0; a < memoryAgents; a++ {
			ag := e2e.CreateRunning(b, p, map[string]any{"name": fmt.Sprintf("Idle %d", a)})
			ids = append(ids, ag["id"].(string))
		}
		// A bare pod of the agents' own template: the engine without the platform.
		bare := barePod(statefulSetTemplate(b, k8s, ids[0]), i)
		if err := k8s.Create(ctx, bare); err != nil {
			b.Fatal(err)
		}
		e2e.Eventually(b, "the bare pod to be Ready", func() bool { return podReady(ctx, k8s, bare) })
		time.Sleep(30 * time.Second) // past the engine's start-up allocations
		pods := podStats(b, cs)
		var agentWS, agentRSS float64
		for _, id := range ids {
			s := pods[gatewayPod(b, k8s, "dev", id).Name]
			agentWS += s.ws / memoryAgents
			agentRSS += s.rss / memoryAgents
		}
		shims := procRSS(b, "containerd-shim-runc-v2") / float64(memoryAgents+1) // one per pod: the agents' and the bare one
		kubelet := (procRSS(b, "kubelet") - idle["kubelet"]) / float64(memoryAgents+1)
		containerd := (procRSS(b, "containerd") - idle["containerd"]) / float64(memoryAgents+1)
		bs := pods[bare.Name]
		b.ReportMetric(agentWS, "agent-workingset-MiB")
		b.ReportMetric(agentRSS, "agent-rss-MiB")
		b.ReportMetric(bs.ws, "barepod-workingset-MiB")
		b.ReportMetric(agentWS/bs.ws, "x-barepod")
		b.ReportMetric(shims, "shim-MiB")
		b.ReportMetric(kubelet+containerd, "kubelet+containerd-MiB")
		b.Logf("per idle agent: pod working set %.0f MiB (RSS %.0f), bare pod %.0f MiB (ratio %.2f); shim %.1f MiB; kubelet +%.1f MiB, containerd +%.1f MiB per pod",
			agentWS, agentRSS, bs.ws, agentWS/bs.ws, shims, kubelet, containerd)
		for _, id := range ids {
			e2e.Must(b, p.Call("DELETE", "/v0/agents/"+id, nil), 200, "delete agent")
		}
		if err := k8s.Delete(ctx, bare); err != nil {
			b.Fatal(err)
		}
	}
}

type podMem struct{ ws, rss float64 }

// podStats is the memory of every pod on the node, in MiB, from the kubelet's stats summary
// (through the API server's node proxy).
func podStats(b *testing.B, cs kubernetes.Interface) map[string]podMem {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/agentplane-node/proxy/stats/summary").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	// The fields read of the kubelet's stats/v1alpha1 Summary.
	var sum struct {
		Pods []struct {
			PodRef struct {
				Name string `json:"name"`
			} `json:"podRef"`
			Memory struct {
				WorkingSetBytes float64 `json:"workingSetBytes"`
				RSSBytes        float64 `json:"rssBytes"`
			} `json:"memory"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(raw, &sum); err != nil {
		b.Fatal(err)
	}
	out := map[string]podMem{}
	for _, p := range sum.Pods {
		out[p.PodRef.Name] = podMem{p.Memory.WorkingSetBytes / (1 << 20), p.Memory.RSSBytes / (1 << 20)}
	}
	return out
}

// procRSS is the summed resident set of the processes whose executable's name is comm, in MiB.
func procRSS(b *testing.B, comm string) float64 {
	procs, err := procfs.AllProcs()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil || st.Comm != comm[:min(len(comm), 15)] { // the kernel cuts comm at 15 characters
			continue
		}
		total += float64(st.ResidentMemory()) / (1 << 20)
	}
	return total
}

// clientset is a typed client of the local cluster (for subresources and node proxies).
func clientset(b *testing.B, p *e2e.Platform) kubernetes.Interface {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", devenv.ReadEnvFile(p.StateDir + "/" + devenv.EnvFileName)["KUBECONFIG"])
	if err != nil {
		b.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}
