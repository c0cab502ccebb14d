package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/images"
	"github.com/agentplane/agentplane/internal/localcluster"
	"github.com/agentplane/agentplane/internal/testenv"
)

// TestRealNodeEngineUpgrade: on `agentplane dev --runtime kube` (a real node) two agents of
// the previous release are moved to the pinned one by an EngineUpgrade in two waves: each is
// snapshotted first, its gateway pod then runs the pinned release's image, and its workspace
// file is intact; the cluster's stop leaves nothing behind.
func TestRealNodeEngineUpgrade(t *testing.T) {
	if !testenv.RealNode(t) {
		return
	}
	baseline := localcluster.TakeBaseline()
	pinned, previous := engineDir(t), previousEngineDir(t)
	from, to := engineVersion(t, previous), engineVersion(t, pinned)
	p := startDev(t, pinned, "--runtime", "kube", "--engine-dir", previous, "--default-engine-version", from)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.stop()
		}
	})
	k8s := p.kubeClient()
	ctx := context.Background()
	const ns = "dev"

	ids := createAgentsAtOnce(t, p, "Node upgrade ", []string{"a", "b"})
	for _, id := range ids {
		must(t, p.call("POST", "/v0/agents/"+id+"/console/exec", map[string]string{"command": "echo kept > before.txt"}), 200, "write before.txt")
	}

	start := time.Now()
	eu := &agentsv1.EngineUpgrade{ObjectMeta: metav1.ObjectMeta{Name: "node-upgrade"}, Spec: agentsv1.EngineUpgradeSpec{
		Version: to, Workspaces: []string{ns}, WavePercent: 50, HealthTimeout: &metav1.Duration{Duration: 5 * time.Minute},
	}}
	if err := k8s.Create(ctx, eu); err != nil {
		t.Fatal(err)
	}
	done := waitUpgrade(t, k8s, eu.Name, agentsv1.UpgradeSucceeded, 12*time.Minute)
	t.Logf("two agents on the node upgraded %s -> %s in %d waves in %s", from, to, len(done.Status.Waves), time.Since(start).Round(time.Second))
	if len(done.Status.Waves) != 2 || done.Status.Counts.Upgraded != 2 {
		t.Fatalf("waves %+v counts %+v", done.Status.Waves, done.Status.Counts)
	}
	for _, id := range ids {
		a := getE2EAgent(t, k8s, id)
		if a.Status.EngineVersion != to || a.Spec.Engine.Version != to {
			t.Fatalf("agent %s: spec %q, runs %q", id, a.Spec.Engine.Version, a.Status.EngineVersion)
		}
		completedSnapshot(t, k8s, id, a.Annotations[agentsv1.AnnotationUpgradeSnapshot])
		if img := gatewayPod(t, k8s, ns, id).Spec.Containers[0].Image; img != images.GatewayImage(to) {
			t.Fatalf("agent %s's gateway pod runs %s, want %s", id, img, images.GatewayImage(to))
		}
		out := must(t, p.call("POST", "/v0/agents/"+id+"/console/exec", map[string]string{"command": "node /app/openclaw.mjs --version; cat before.txt"}), 200, "exec").str("stdout")
		if !strings.Contains(out, "OpenClaw "+to) || !strings.HasSuffix(out, "kept\n") {
			t.Fatalf("agent %s after the upgrade: %q", id, out)
		}
	}

	stopped = true
	stopClusterClean(t, p, baseline)
}

// stopClusterClean stops `agentplane dev --runtime kube` and fails when the cluster's stop
// left anything on the machine that was not there at baseline.
func stopClusterClean(t *testing.T, p *platform, baseline localcluster.Baseline) {
	t.Helper()
	p.stop()
	left, err := localcluster.LeftoversAfterStop(filepath.Join(p.stateDir, "cluster"), baseline)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the cluster's stop left behind:\n%s", strings.Join(left, "\n"))
	}
}
