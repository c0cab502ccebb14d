package stress

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// killedAgents is how many agents are provisioning when the manager is killed.
const killedAgents = 6

// TestManagerKilledMidProvisioning SIGKILLs a manager (a child process) while its agents'
// gateways boot (FAKECLAW_BOOT_DELAY=3s), then starts a new manager over the same state dir
// and control plane: every agent ends running with exactly one gateway process (the old one
// adopted, or a new one once the old is gone), and no owned object is duplicated. It runs on
// a control plane of its own: the shared platform's controllers would manage these agents too.
func TestManagerKilledMidProvisioning(t *testing.T) {
	cp := ownControlPlane(t)
	state := t.TempDir()
	t.Cleanup(func() { // after the children, before the dir goes
		if left := killGateways(state); len(left) > 0 {
			t.Errorf("gateways left running at the end: %v", left)
		}
	})
	slow, err := wrapEngine(filepath.Join(t.TempDir(), "engine"), fakeDir, "FAKECLAW_BOOT_DELAY=3s")
	if err != nil {
		t.Fatal(err)
	}
	cfg := childConfig{
		Host: cp.Config.Host, CAData: cp.Config.CAData, CertData: cp.Config.CertData, KeyData: cp.Config.KeyData,
		StateDir: state, EngineDirs: map[string]string{versionGood: slow}, DefaultVersion: versionGood,
	}
	first := startChild(t, "first manager", cfg)

	const ws = "killed"
	if err := workspacens.EnsureWorkspace(bg(), cp.Client, &agentsv1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: ws}, Spec: agentsv1.WorkspaceSpec{Plan: agentsv1.PlanPro, Members: []agentsv1.WorkspaceMember{{UserID: owner, Role: agentsv1.RoleOwner}}},
	}); err != nil {
		t.Fatal(err)
	}
	key, err := auth.EnsureSigningKey(bg(), cp.Client, platform.DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := auth.CreateKey(bg(), cp.Client, signer, auth.KeyRequest{Workspace: ws, UserID: owner, Scopes: []string{auth.ScopeAll}})
	if err != nil {
		t.Fatal(err)
	}
	rememberJWT("bearer JWT of "+ws, tok)
	var agents []string
	for i := range killedAgents {
		r := expect(t, call(first.url, "POST", "/v0/agents?wait=false", tok, map[string]any{"name": fmt.Sprintf("survivor %d", i)}), 202, "create agent")
		agents = append(agents, r.obj("agent")["id"].(string))
	}
	procKey := func(agent string) string { return ws + "/" + agent }

	// Kill the manager once some gateways were started and none has booted yet.
	if err := eventually(20*time.Second, 20*time.Millisecond, func() error {
		if n := len(gatewayPIDs(state)); n < killedAgents/2 {
			return fmt.Errorf("%d gateways started", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first.kill()
	before := gatewayPIDs(state)
	booting := 0
	for _, a := range agents {
		if phase := agentIn(t, cp, ws, a).Status.Phase; phase != agentsv1.AgentRunning {
			booting++
		}
	}
	if booting < killedAgents/2 {
		t.Fatalf("only %d of %d agents were still provisioning when the manager was killed: widen the boot delay", booting, killedAgents)
	}
	t.Logf("killed the manager with %d of %d gateways started, %d agents not running yet: %v", len(before), killedAgents, booting, before)

	second := startChild(t, "second manager", cfg)
	if err := eventually(settleTimeout, 200*time.Millisecond, func() error {
		for _, a := range agents {
			if phase := agentIn(t, cp, ws, a).Status.Phase; phase != agentsv1.AgentRunning {
				return fmt.Errorf("agent %s is %q", a, phase)
			}
		}
		return nil
	}); err != nil {
		t.Fatal("after the restart:", err)
	}

	now := gatewayPIDs(state)
	adopted := 0
	for _, a := range agents {
		if old := before[procKey(a)]; len(old) == 1 && slices.Equal(old, now[procKey(a)]) {
			adopted++
		}
		pids := now[procKey(a)]
		if len(pids) != 1 || pids[0] != recordedPID(state, procKey(a)) {
			t.Errorf("agent %s: gateway processes %v, the runtime records pid %d", a, pids, recordedPID(state, procKey(a)))
		}
		for _, old := range before[procKey(a)] {
			if !slices.Contains(pids, old) && alive(old) {
				t.Errorf("agent %s: the gateway %d of the killed manager still runs beside %v", a, old, pids)
			}
		}
	}
	for k := range now {
		if !slices.ContainsFunc(agents, func(a string) bool { return procKey(a) == k }) {
			t.Errorf("gateway processes %v of unknown agent %s", now[k], k)
		}
	}
	t.Logf("after the restart: %d gateways adopted, %d started anew", adopted, killedAgents-adopted)
	checkOwnedObjects(t, cp, ws, agents)
	list := expect(t, call(second.url, "GET", "/v0/agents", tok, nil), 200, "list agents")
	if n := len(list.Body["agents"].([]any)); n != killedAgents {
		t.Errorf("the facade lists %d agents, want %d", n, killedAgents)
	}

	if !second.stop(60 * time.Second) {
		t.Fatal("the second manager did not stop within 60s of SIGTERM")
	}
	if left := gatewayPIDs(state); len(left) > 0 {
		t.Errorf("a manager stopped cleanly left gateways running: %v", left)
	}
	// Nor anything else it or the killed manager started: the engine's compile-cache warm-up
	// the killed one was running is the next one's to reap.
	if left := markedPIDs(state); len(left) > 0 {
		t.Errorf("processes of the state dir left running after a clean stop: %v", left)
	}
}

// checkOwnedObjects: each agent has exactly one gateway-token Secret and one finalizer, and
// the workspace reserves exactly one slot per agent.
func checkOwnedObjects(t *testing.T, cp *kubeenv.Env, ws string, agents []string) {
	t.Helper()
	var secrets corev1.SecretList
	if err := cp.Client.List(bg(), &secrets, client.InNamespace(ws), client.HasLabels{agentsv1.LabelGatewayTokenOf}); err != nil {
		t.Fatal(err)
	}
	perAgent := map[string]int{}
	for _, s := range secrets.Items {
		perAgent[s.Labels[agentsv1.LabelGatewayTokenOf]]++
	}
	w := &agentsv1.Workspace{}
	if err := cp.Client.Get(bg(), keyOf("", ws), w); err != nil {
		t.Fatal(err)
	}
	var all agentsv1.AgentList
	if err := cp.Client.List(bg(), &all, client.InNamespace(ws)); err != nil {
		t.Fatal(err)
	}
	if err := slotsMatchAgents(w, all.Items); err != nil {
		t.Error(err)
	}
	for _, a := range agents {
		fin := 0
		for _, f := range agentIn(t, cp, ws, a).Finalizers {
			if f == agentsv1.AgentFinalizer {
				fin++
			}
		}
		if perAgent[a] != 1 || fin != 1 {
			t.Errorf("agent %s: %d gateway-token Secrets, %d finalizers (want 1 each)", a, perAgent[a], fin)
		}
	}
	if len(secrets.Items) != len(agents) || len(all.Items) != len(agents) {
		t.Errorf("%d gateway-token Secrets and %d agents for %d expected", len(secrets.Items), len(all.Items), len(agents))
	}
}

// agentIn reads an agent from control plane cp.
func agentIn(t testing.TB, cp *kubeenv.Env, ns, id string) *agentsv1.Agent {
	t.Helper()
	a := &agentsv1.Agent{}
	if err := cp.Client.Get(bg(), keyOf(ns, id), a); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestUnrecordedGatewayIsStopped is the narrow window of the test above made certain: a
// manager killed after starting a gateway and before recording its pid leaves a gateway that
// no state.json names. A new local runtime over the state dir must stop it (it would
// otherwise run forever beside the one the next Ensure starts). A process carrying the
// runtime's marker for an agent home stands in for that gateway.
func TestUnrecordedGatewayIsStopped(t *testing.T) {
	state := t.TempDir()
	home := filepath.Join(state, "agents", "lost", "agt-orphan", "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command("sleep", "300")
	orphan.Env = []string{markerEnv + home}
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{})
	go func() { _ = orphan.Wait(); close(gone) }()
	t.Cleanup(func() { _ = orphan.Process.Kill() })

	rt, err := local.New(local.Options{StateDir: state, Engine: openclaw.New(), EngineDirs: map[string]string{versionGood: fakeDir}, Log: logf.Log})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(bg()) }()
	select {
	case <-gone:
	case <-time.After(testenv.EventBound):
		t.Fatalf("the unrecorded gateway %d still runs after a new runtime took over %s", orphan.Process.Pid, state)
	}
}
