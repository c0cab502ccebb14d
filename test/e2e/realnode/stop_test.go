package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/localcluster"
)

// startRealNode takes the machine's baseline and starts `agentplane dev --runtime kube` (a
// cluster with the machine's real node) with the extra args. A test that ends before
// stopClusterClean (a failure) still stops the cluster.
func startRealNode(t *testing.T, engine string, args ...string) (*platform, localcluster.Baseline) {
	t.Helper()
	baseline := localcluster.TakeBaseline()
	p := startDev(t, engine, append([]string{"--runtime", "kube"}, args...)...)
	t.Cleanup(p.stop)
	return p, baseline
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
