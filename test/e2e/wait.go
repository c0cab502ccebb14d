package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/scheme"
)

// GatewayStatus POSTs a made-up tool to the gateway: 401 means the token is refused, 404 that
// it is accepted (the tool does not exist), without side effects.
func GatewayStatus(t *testing.T, endpoint, token string) int {
	t.Helper()
	// A gateway that has just (re)started answers /healthz before its operator context is up;
	// until then tool calls get 503 "Gateway context is unavailable; retry shortly." (the
	// engine's own transient, seen right after a snapshot reset). Retry that one answer.
	deadline := time.Now().Add(EventBound)
	for {
		status := GatewayStatusOnce(t, endpoint, token)
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return status
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// GatewayStatusOnce is GatewayStatus without the retry of the engine's transient 503.
func GatewayStatusOnce(t *testing.T, endpoint, token string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), EventBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", endpoint+"/tools/invoke", strings.NewReader(`{"tool":"agentplane_probe","args":{}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("gateway %s: %v", endpoint, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// EventBound is how long a test waits for an event before it calls the event lost. The
// tests wait for events, never for a time: no verdict depends on how fast the machine is,
// and this bound only ends a wait that would otherwise never end. It is sized for a cold,
// loaded 2-core machine (make test's other tiers and the builds beside it), where one real
// gateway's boot has taken over two minutes and an engine CLI start over 45 s.
const EventBound = 10 * time.Minute

// Eventually polls f until it is true, and fails the test if EventBound passes first.
func Eventually(t testing.TB, what string, f func() bool) {
	t.Helper()
	if !Within(EventBound, f) {
		t.Fatalf("timed out after %s waiting for %s", EventBound, what)
	}
}

// Within polls f every 250 ms until it holds (true) or timeout passes (false). A test passes
// EventBound, or a bound the system under test sets itself (a rollout's own deadlines).
func Within(timeout time.Duration, f func() bool) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return false
}

// EngineVersion asks the engine installed in dir for its version.
func EngineVersion(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(dir, "bin", "openclaw"), "--version").Output()
	if err != nil {
		t.Fatalf("engine in %s: %v", dir, err)
	}
	v, err := openclaw.New().ParseVersion(out)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// KubeClient is a cluster-admin client of the local cluster `agentplane dev --runtime kube`
// started (its kubeconfig is in the dev env file).
func (p *Platform) KubeClient() client.Client {
	p.t.Helper()
	kc := devenv.ReadEnvFile(filepath.Join(p.StateDir, devenv.EnvFileName))["KUBECONFIG"]
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		p.t.Fatal(err)
	}
	ctrllog.SetLogger(logr.Discard()) // the client's own warnings are not the test's output
	k8s, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		p.t.Fatal(err)
	}
	return k8s
}

// WaitUpgrade waits for the EngineUpgrade to reach phase. The rollout bounds each wave itself
// (a snapshot and an upgraded gateway have a health timeout each before it halts), so the
// wait is sized from its own spec (RolloutBound), never shorter than EventBound.
func WaitUpgrade(t *testing.T, k8s client.Client, name string, phase agentsv1.EngineUpgradePhase) *agentsv1.EngineUpgrade {
	t.Helper()
	eu := &agentsv1.EngineUpgrade{}
	start, bound := time.Now(), EventBound
	for {
		err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, eu)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if eu.Status.Phase == phase {
			return eu
		}
		if err == nil {
			bound = max(EventBound, RolloutBound(upgradeSelected(eu.Status.Counts), eu.Spec.HealthTimeout))
		}
		if time.Since(start) > bound {
			t.Fatalf("EngineUpgrade %s: phase %q after %s, want %s: %+v", name, eu.Status.Phase, bound, phase, eu.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// upgradeSelected is how many agents the upgrade selected.
func upgradeSelected(c agentsv1.UpgradeCounts) int {
	return int(c.Pending + c.Upgrading + c.Upgraded + c.RolledBack)
}

// RolloutBound is the longest a rollout of total agents with that health timeout (nil: the
// API's default of 5 minutes) can take by its own deadlines: at most one wave per agent, each
// a snapshot and a restarted gateway with a health timeout each, plus a minute of slack per
// wave and one more wave's worth to get going.
func RolloutBound(total int, health *metav1.Duration) time.Duration {
	h := 5 * time.Minute
	if health != nil {
		h = health.Duration
	}
	return time.Duration(total+1) * (2*h + time.Minute)
}

// CompletedSnapshot is the agent's completed upgrade Snapshot of that CID.
func CompletedSnapshot(t *testing.T, k8s client.Client, id, cid string) agentsv1.Snapshot {
	t.Helper()
	list := &agentsv1.SnapshotList{}
	if err := k8s.List(context.Background(), list, client.InNamespace("dev"), client.HasLabels{agentsv1.LabelUpgrade}); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Spec.AgentRef.Name == id && s.Status.CID == cid && cid != "" && s.Status.Phase == agentsv1.SnapshotCompleted {
			return s
		}
	}
	t.Fatalf("no completed upgrade snapshot %q of agent %s among %d", cid, id, len(list.Items))
	return agentsv1.Snapshot{}
}

// GetAgent is the Agent id in the dev namespace, read from the API server.
func GetAgent(t *testing.T, k8s client.Client, id string) *agentsv1.Agent {
	t.Helper()
	a := &agentsv1.Agent{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "dev", Name: id}, a); err != nil {
		t.Fatal(err)
	}
	return a
}
