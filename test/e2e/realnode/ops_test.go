package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/test/e2e"
)

// The real-node suite's operations on a running agent: each leaves the agent running on the
// real node for the next.

// agentOnNode is one agent of the real-node suite.
type agentOnNode struct {
	p      *e2e.Platform
	k8s    client.Client
	ns, id string
	base   string
}

// agent is the agent as the facade answers it.
func (a agentOnNode) agent(t *testing.T) map[string]any {
	t.Helper()
	return e2e.Must(t, a.p.Call("GET", a.base, nil), 200, "get agent").Obj("agent")
}

// podUID is the UID of the agent's Ready gateway pod.
func (a agentOnNode) podUID(t *testing.T) string {
	t.Helper()
	return string(gatewayPod(t, a.k8s, a.ns, a.id).UID)
}

// waitRunning waits until the facade answers the agent running.
func (a agentOnNode) waitRunning(t *testing.T, what string) {
	t.Helper()
	e2e.Eventually(t, what, func() bool {
		r := a.p.Call("GET", a.base, nil)
		return r.Status == 200 && r.Obj("agent")["status"] == "running"
	})
}

// watchReasons polls the facade's statusReason until stop says so, and returns every reason
// it saw with its message.
func (a agentOnNode) watchReasons(t *testing.T, what string, stop func(agent map[string]any) bool) map[string]string {
	t.Helper()
	seen := map[string]string{}
	e2e.Eventually(t, what, func() bool {
		r := a.p.Call("GET", a.base, nil)
		if r.Status != 200 {
			return false
		}
		ag := r.Obj("agent")
		if reason, _ := ag["statusReason"].(string); reason != "" {
			seen[reason], _ = ag["statusMessage"].(string)
		}
		return stop(ag)
	})
	return seen
}

// checkSnapshotsRollThePod: a reset on the kube runtime replaces the gateway pod (the
// workspace is restored before the gateway starts) and the bytes come back.
func (a agentOnNode) checkSnapshotsRollThePod(t *testing.T) {
	before := a.podUID(t)
	e2e.CheckSnapshots(t, a.p, a.base)
	if after := a.podUID(t); after == before {
		t.Fatalf("the reset kept gateway pod %s", before)
	}
}

// checkEngineUpgrade moves the agent from the release before the pinned engine to the pinned
// one the way a platform team does: an EngineUpgrade of its workspace. The agent is
// snapshotted first, its gateway pod then runs the pinned release's image and the uploaded
// file is still in its workspace. The policy is deleted afterwards, so agents the test creates
// later (on the default, older release) are left alone.
func (a agentOnNode) checkEngineUpgrade(t *testing.T, from, to string) {
	ctx := context.Background()
	if v := a.agent(t)["engineVersion"]; v != from {
		t.Fatalf("engine version %v before the upgrade, want %s", v, from)
	}
	eu := &agentsv1.EngineUpgrade{ObjectMeta: metav1.ObjectMeta{Name: "node-upgrade"}, Spec: agentsv1.EngineUpgradeSpec{
		Version: to, Workspaces: []string{a.ns}, WavePercent: 50, HealthTimeout: &metav1.Duration{Duration: 5 * time.Minute},
	}}
	if err := a.k8s.Create(ctx, eu); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.k8s.Delete(ctx, eu); err != nil {
			t.Errorf("delete the EngineUpgrade: %v", err)
		}
	}()
	start := time.Now()
	done := e2e.WaitUpgrade(t, a.k8s, eu.Name, agentsv1.UpgradeSucceeded)
	t.Logf("the agent on the node upgraded %s -> %s by an EngineUpgrade in %s", from, to, time.Since(start).Round(time.Second))
	if done.Status.Counts.Upgraded != 1 || done.Status.Counts.RolledBack != 0 {
		t.Fatalf("counts %+v", done.Status.Counts)
	}
	ag := e2e.GetAgent(t, a.k8s, a.id)
	if ag.Status.EngineVersion != to || ag.Spec.Engine.Version != to {
		t.Fatalf("spec %q, runs %q", ag.Spec.Engine.Version, ag.Status.EngineVersion)
	}
	e2e.CompletedSnapshot(t, a.k8s, a.id, ag.Annotations[agentsv1.AnnotationUpgradeSnapshot])
	a.waitRunning(t, "the upgraded agent to run")
	pod := gatewayPod(t, a.k8s, a.ns, a.id)
	if img := pod.Spec.Containers[0].Image; img != images.GatewayImage(to) {
		t.Fatalf("the gateway pod runs %s, want %s", img, images.GatewayImage(to))
	}
	out := e2e.Must(t, a.p.Call("POST", a.base+"/console/exec", map[string]string{"command": "node /app/openclaw.mjs --version; cat " + e2e.UploadedFile}), 200, "exec").Str("stdout")
	if !strings.Contains(out, "OpenClaw "+to) || !strings.Contains(out, "uploaded into the workspace") {
		t.Fatalf("after the upgrade the engine and workspace say %q", out)
	}
}

// checkStopStart stops the agent through its resource (no pod, not_running, state kept) and
// starts it again.
func (a agentOnNode) checkStopStart(t *testing.T) {
	ctx := context.Background()
	setStopped := func(stopped bool) {
		t.Helper()
		patch := []byte(`{"spec":{"stopped":` + strconv.FormatBool(stopped) + `}}`)
		if err := a.k8s.Patch(ctx, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: a.id}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			t.Fatal(err)
		}
	}
	setStopped(true)
	e2e.Eventually(t, "the stopped agent's pod to be gone", func() bool {
		var pods corev1.PodList
		if a.k8s.List(ctx, &pods, client.InNamespace(a.ns), client.MatchingLabels{agentsv1.LabelAgent: a.id}) != nil {
			return false
		}
		r := a.p.Call("GET", a.base, nil)
		return len(pods.Items) == 0 && r.Status == 200 && r.Obj("agent")["status"] == "not_running"
	})
	setStopped(false)
	a.waitRunning(t, "the started agent to run")
	out := e2e.Must(t, a.p.Call("POST", a.base+"/console/exec", map[string]string{"command": "cat " + e2e.UploadedFile}), 200, "exec").Str("stdout")
	if !strings.Contains(out, "uploaded into the workspace") {
		t.Fatalf("the workspace after stop and start: %q", out)
	}
}

// checkSuspendWake suspends the agent through the REST door (no pod, its claim kept), then a
// console request wakes it on the same volume and waits for it instead of failing; resume
// clears the suspension.
func (a agentOnNode) checkSuspendWake(t *testing.T) {
	ctx := context.Background()
	got := e2e.Must(t, a.p.Call("POST", a.base+"/suspend", nil), 200, "suspend").Obj("agent")
	if got["status"] != "suspended" {
		t.Fatalf("suspended agent: %v", got)
	}
	e2e.Eventually(t, "the suspended agent's pod to be gone", func() bool {
		var pods corev1.PodList
		return a.k8s.List(ctx, &pods, client.InNamespace(a.ns), client.MatchingLabels{agentsv1.LabelAgent: a.id}) == nil && len(pods.Items) == 0
	})
	start := time.Now()
	out := e2e.Must(t, a.p.Call("POST", a.base+"/console/exec", map[string]string{"command": "cat " + e2e.UploadedFile}), 200, "exec on a suspended agent").Str("stdout")
	if !strings.Contains(out, "uploaded into the workspace") {
		t.Fatalf("the workspace after suspend and wake: %q", out)
	}
	t.Logf("a request woke the suspended agent's pod and ran in %s", time.Since(start).Round(time.Millisecond))
	if got := e2e.Must(t, a.p.Call("POST", a.base+"/resume", nil), 200, "resume").Obj("agent"); got["status"] != "running" || got["suspended"] == true {
		t.Fatalf("resumed agent: %v", got)
	}
}

// checkGatewayKilled kills the gateway process inside the pod: the agent shows the crash
// while the kubelet restarts the container, then runs again with the restart counted.
func (a agentOnNode) checkGatewayKilled(t *testing.T) {
	restarts, _ := a.agent(t)["restarts"].(float64)
	// PID 1 is tini; its only child is the engine. The exec's own shell is not its child.
	a.p.Call("POST", a.base+"/console/exec", map[string]string{"command": "kill -9 $(cat /proc/1/task/1/children)"})
	seen := a.watchReasons(t, "the agent to run again after the crash", func(ag map[string]any) bool {
		n, _ := ag["restarts"].(float64)
		return ag["status"] == "running" && n > restarts
	})
	crash := ""
	for _, reason := range []string{agentsv1.ReasonCrashed, agentsv1.ReasonPodExited} {
		if msg, ok := seen[reason]; ok {
			crash = msg
		}
	}
	if !strings.Contains(crash, "code 137") {
		t.Fatalf("the agent never showed the killed gateway's exit (reasons seen: %v)", seen)
	}
	t.Logf("reasons the facade showed while the kubelet restarted the gateway: %v", seen)
}

// checkKubeletStopped freezes the real node's kubelet (SIGSTOP): the node goes NotReady, the
// agent's condition says so, and it runs again once the kubelet continues.
func (a agentOnNode) checkKubeletStopped(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(a.p.StateDir, "cluster", "kubelet.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || !strings.Contains(readFile(t, "/proc/"+strconv.Itoa(pid)+"/cmdline"), "kubelet") {
		t.Fatalf("kubelet pid %q: %v", raw, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()
	e2e.Eventually(t, "the agent to report its node NotReady", func() bool {
		var ag agentsv1.Agent
		if a.k8s.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: a.id}, &ag) != nil {
			return false
		}
		c := meta.FindStatusCondition(ag.Status.Conditions, agentsv1.AgentGatewayReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == agentsv1.ReasonNodeNotReady &&
			strings.Contains(c.Message, "Kubelet stopped posting node status")
	})
	if r := a.agent(t); r["statusReason"] != agentsv1.ReasonNodeNotReady {
		t.Errorf("the facade says %v/%v while the node is NotReady", r["status"], r["statusReason"])
	}
	t.Logf("the agent said NodeNotReady %s after the kubelet froze", time.Since(frozen).Round(time.Second))
	resume()
	continued := time.Now()
	a.waitRunning(t, "the agent to run again once the kubelet continues")
	t.Logf("running again %s after the kubelet continued", time.Since(continued).Round(time.Second))
}

// checkPendingForMemory applies an agent that asks for more memory than the node has: it
// stays starting with the scheduler's reason, and goes away when deleted.
func (a agentOnNode) checkPendingForMemory(t *testing.T) {
	ctx := context.Background()
	big := &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Name: "too-big", Namespace: a.ns},
		Spec: agentsv1.AgentSpec{DisplayName: "Asks for a terabyte", Resources: &agentsv1.AgentResources{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Ti")},
		}},
	}
	if err := a.k8s.Create(ctx, big); err != nil {
		t.Fatal(err)
	}
	deleted := false
	defer func() {
		if !deleted { // the suite's later checks expect only their own agents
			_ = a.k8s.Delete(ctx, big)
		}
	}()
	e2e.Eventually(t, "the agent to show the scheduler's reason", func() bool {
		r := a.p.Call("GET", "/v0/agents/too-big", nil)
		if r.Status != 200 {
			return false
		}
		ag := r.Obj("agent")
		msg, _ := ag["statusMessage"].(string)
		return ag["status"] == "starting" && ag["statusReason"] == agentsv1.ReasonUnschedulable && strings.Contains(msg, "Insufficient memory")
	})
	deleted = true
	if err := a.k8s.Delete(ctx, big); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the pending agent to be gone", func() bool { return a.p.Call("GET", "/v0/agents/too-big", nil).Status == 404 })
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
