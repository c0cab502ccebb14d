// Package realnode holds the end-to-end tests of the kube runtime on a real node (this
// machine's containerd, kubelet and kube-proxy; root; required under CI=true) with the real
// OpenClaw engine (harness: package e2e).
package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/test/e2e"
)

// TestRealNodeKubeRuntime runs `agentplane dev --runtime kube`: a local cluster whose node is
// this machine's real kubelet, containerd and runc, with real OpenClaw gateway images of two
// engine releases. One cluster serves both checks in turn (a cluster start and stop is a
// minute or more of the package's time): an agent's lifecycle, then a GatewayPool; the
// cluster's stop then leaves nothing on the machine.
func TestRealNodeKubeRuntime(t *testing.T) {
	if !testenv.RealNode(t) {
		return
	}
	// Agents start on the release before the pinned engine and are upgraded to it.
	pinned, previous := e2e.EngineDir(t), e2e.PreviousEngineDir(t)
	from, to := e2e.EngineVersion(t, previous), e2e.EngineVersion(t, pinned)
	llm := providertest.New()
	t.Cleanup(llm.Close)
	p, baseline := startRealNode(t, pinned, "--engine-dir", previous, "--default-engine-version", from,
		"--model-proxy-upstream", "openai="+llm.URL)
	t.Run("agent lifecycle", func(t *testing.T) { checkAgentLifecycle(t, p, llm, from, to) })
	t.Run("gateway pool", func(t *testing.T) { checkGatewayPool(t, p) })
	stopClusterClean(t, p, baseline)
}

// checkAgentLifecycle: agents made through both doors (REST and the Agent resource) reach
// `running` with a Ready gateway pod; one agent goes through what users do with it (exec
// through the kubelet, config, tasks, uploads, snapshots, an engine upgrade from `from` to
// `to`, stop and start) and what goes wrong under it (its gateway killed, its kubelet stopped,
// an agent too big for the node); a provider key stays in the model proxy (llm behind it),
// which the pod reaches on the node's address, while another secret reaches the gateway's
// environment and no pod spec; code inside the agent reaches nothing else (the node enforces
// its NetworkPolicy); an agent of the RuntimeClass gvisor runs inside gVisor's kernel; delete
// removes pod, claim, volume and data, and nothing of the agents is left in the workspace.
func checkAgentLifecycle(t *testing.T, p *e2e.Platform, llm *providertest.Provider, from, to string) {
	k8s := p.KubeClient()
	ctx := context.Background()

	start := time.Now()
	created := e2e.CreateRunning(t, p, map[string]any{"name": "Node Agent"})
	t.Logf("REST create to running on the real node: %s", time.Since(start).Round(time.Millisecond))
	id := created["id"].(string)
	if created["status"] != "running" {
		t.Fatalf("created agent: %v", created)
	}
	base := "/v0/agents/" + id
	ns := "dev"
	pod := gatewayPod(t, k8s, ns, id)
	if pod.Spec.NodeName != "agentplane-node" {
		t.Errorf("the gateway runs on node %q, want the real node", pod.Spec.NodeName)
	}
	if img := pod.Spec.Containers[0].Image; img != images.GatewayImage(from) {
		t.Errorf("gateway image %s", img)
	}

	a := agentOnNode{p: p, k8s: k8s, ns: ns, id: id, base: base}
	t.Run("gateway logs through the API server", a.checkLogs)

	t.Run("console exec through the kubelet", func(t *testing.T) {
		r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "echo hello; id -u; exit 3"}), 200, "exec")
		if r.Body["exitCode"] != 3.0 || r.Str("stdout") != "hello\n1000\n" {
			t.Fatalf("exec: %s", r.Raw)
		}
	})

	t.Run("tini is PID 1 and the heap follows the memory limit", func(t *testing.T) {
		r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{
			"command": `tr '\0' ' ' < /proc/1/cmdline; echo; pid=$(grep -l gateway /proc/[0-9]*/cmdline | head -1 | cut -d/ -f3); tr '\0' '\n' < /proc/$pid/environ | grep '^NODE_OPTIONS='`,
		}), 200, "exec")
		out := r.Str("stdout")
		if !strings.HasPrefix(out, images.Init+" -- node /app/openclaw.mjs gateway") || !strings.Contains(out, "NODE_OPTIONS=--max-old-space-size=1536") {
			t.Fatalf("PID 1 and the gateway's NODE_OPTIONS: %q", out)
		}
	})

	t.Run("probes read the engine's JSON, not any 200", func(t *testing.T) {
		rp := pod.Spec.Containers[0].ReadinessProbe
		if rp == nil || rp.Exec == nil || rp.Exec.Command[0] != images.Probe || !strings.HasSuffix(rp.Exec.Command[1], "/readyz") {
			t.Fatalf("readiness probe %+v, want %s on /readyz", rp, images.Probe)
		}
		// The live engine: its probe routes pass; a path the engine answers 200 without its
		// probe body (the Control UI's catch-all) does not.
		r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{
			"command": images.Probe + " " + rp.Exec.Command[1] + " " + strings.Replace(rp.Exec.Command[1], "/readyz", "/healthz", 1) + "; echo ok=$?; " +
				images.Probe + " " + strings.Replace(rp.Exec.Command[1], "/readyz", "/not-a-probe-route", 1) + "; echo unknown=$?",
		}), 200, "exec")
		out := r.Str("stdout")
		if !strings.Contains(out, "ok=0") || !strings.Contains(out, "unknown=1") {
			t.Fatalf("probe runs: %q", out)
		}
	})

	t.Run("config validate, write and read back", func(t *testing.T) { e2e.CheckConfig(t, p, base) })
	t.Run("tasks", func(t *testing.T) { e2e.CheckTasks(t, p, base) })
	t.Run("files upload", func(t *testing.T) { e2e.CheckUpload(t, p, base) })
	t.Run("snapshot sync and reset roll the pod", a.checkSnapshotsRollThePod)
	t.Run("an EngineUpgrade moves it to the next engine version", func(t *testing.T) { a.checkEngineUpgrade(t, from, to) })
	t.Run("stop and start", a.checkStopStart)
	t.Run("suspend, a request wakes it, resume", a.checkSuspendWake)
	t.Run("the gateway killed inside the pod", a.checkGatewayKilled)
	t.Run("the kubelet stopped", a.checkKubeletStopped)
	t.Run("a pod pending for memory", a.checkPendingForMemory)

	t.Run("a provider key stays in the model proxy; other secrets reach the gateway and no pod spec", func(t *testing.T) {
		checkModelProxyOnNode(t, p, llm, k8s, ns, base)
	})
	t.Run("code inside the agent reaches nothing of another agent or of the platform", a.checkContainedOnNode)

	t.Run("the Agent resource door, on gVisor by its RuntimeClass, with its NetworkPolicy", func(t *testing.T) {
		// The node's RuntimeClass gvisor (runsc, built from gVisor's Go module) runs this
		// gateway inside gVisor's kernel; the agent made through REST runs on runc.
		if !localcluster.HasGVisor(kubeenv.AssetsDir()) {
			t.Fatalf("no runsc and containerd-shim-runsc-v1 in %s: run `make gvisor` (make test does)", kubeenv.AssetsDir())
		}
		start := time.Now()
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Name: "kubectl-agent", Namespace: ns},
			Spec:       agentsv1.AgentSpec{DisplayName: "Applied with kubectl", RuntimeClassName: localcluster.GVisorRuntimeClass},
		}
		if err := k8s.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		e2e.Eventually(t, "the applied agent to run", func() bool {
			r := p.Call("GET", "/v0/agents/kubectl-agent", nil)
			return r.Status == 200 && r.Obj("agent")["status"] == "running"
		})
		t.Logf("kubectl create to running on gVisor (runsc, platform %s): %s", localcluster.GVisorPlatform, time.Since(start).Round(time.Millisecond))
		checkKernels(t, p, k8s, ns, id, "kubectl-agent")
		// Each agent has its default-deny NetworkPolicy (enforced on this node by kube-router's
		// firewall: checkContainedOnNode).
		for _, name := range []string{"kubectl-agent", id} {
			np := &networkingv1.NetworkPolicy{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, np); err != nil {
				t.Errorf("network policy of %s: %v", name, err)
			} else if len(np.Spec.PolicyTypes) != 2 || len(np.OwnerReferences) != 1 || np.OwnerReferences[0].Name != name {
				t.Errorf("network policy of %s: types %v, owners %+v", name, np.Spec.PolicyTypes, np.OwnerReferences)
			}
		}
		var wsNS corev1.Namespace
		if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, &wsNS); err != nil || wsNS.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("workspace namespace labels %v (%v), want Pod Security restricted enforced", wsNS.Labels, err)
		}
		if err := k8s.Delete(ctx, a); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("delete removes pod, claim, volume and its data", func(t *testing.T) {
		var pvcs corev1.PersistentVolumeClaimList
		if err := k8s.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var data []string
		for _, c := range pvcs.Items {
			if strings.Contains(c.Name, id) {
				var pv corev1.PersistentVolume
				if err := k8s.Get(ctx, client.ObjectKey{Name: c.Spec.VolumeName}, &pv); err != nil {
					t.Fatal(err)
				}
				data = append(data, pv.Spec.Local.Path)
			}
		}
		if len(data) != 1 {
			t.Fatalf("want one home volume of %s, found %v", id, data)
		}
		if _, err := os.Stat(filepath.Join(data[0], ".openclaw")); err != nil {
			t.Fatalf("the gateway wrote nothing to its home volume: %v", err)
		}
		e2e.Must(t, p.Call("DELETE", base, nil), 200, "delete")
		e2e.Eventually(t, "pod, StatefulSet, claims, volumes and data to be gone", func() bool {
			var pods corev1.PodList
			var sts appsv1.StatefulSetList
			var pvs corev1.PersistentVolumeList
			if k8s.List(ctx, &pods, client.InNamespace(ns)) != nil || k8s.List(ctx, &sts, client.InNamespace(ns)) != nil ||
				k8s.List(ctx, &pvcs, client.InNamespace(ns)) != nil || k8s.List(ctx, &pvs) != nil {
				return false
			}
			_, err := os.Stat(data[0])
			return len(pods.Items) == 0 && len(sts.Items) == 0 && len(pvcs.Items) == 0 && len(pvs.Items) == 0 && os.IsNotExist(err)
		})
	})
}

// gatewayPod is the Ready gateway pod of agent id.
func gatewayPod(t testing.TB, k8s client.Client, ns, id string) corev1.Pod {
	t.Helper()
	p, n, err := readyGatewayPod(k8s, ns, id)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		t.Fatalf("no Ready gateway pod of %s among %d pods", id, n)
	}
	return *p
}

// readyGatewayPod is the agent's Ready gateway pod, if any, and how many pods it has.
func readyGatewayPod(k8s client.Client, ns, id string) (*corev1.Pod, int, error) {
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{agentsv1.LabelAgent: id}); err != nil {
		return nil, 0, err
	}
	for i, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				return &pods.Items[i], len(pods.Items), nil
			}
		}
	}
	return nil, len(pods.Items), nil
}
