package realnode

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/test/e2e"
)

// startRealNode takes the machine's baseline and starts `agentplane dev --runtime kube` (a
// cluster with the machine's real node) with the extra args. A test that ends before
// stopClusterClean (a failure) still stops the cluster.
func startRealNode(t *testing.T, engine string, args ...string) (*e2e.Platform, localcluster.Baseline) {
	t.Helper()
	baseline := localcluster.TakeBaseline()
	p := e2e.StartDev(t, engine, append([]string{"--runtime", "kube"}, args...)...)
	t.Cleanup(p.Stop)
	return p, baseline
}

// stopClusterClean stops `agentplane dev --runtime kube` and fails when the cluster's stop
// left anything on the machine that was not there at baseline.
func stopClusterClean(t *testing.T, p *e2e.Platform, baseline localcluster.Baseline) {
	t.Helper()
	p.Stop()
	left, err := localcluster.LeftoversAfterStop(filepath.Join(p.StateDir, "cluster"), baseline)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the cluster's stop left behind:\n%s", strings.Join(left, "\n"))
	}
}
