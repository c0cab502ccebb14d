package devmode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/test/e2e"
)

// brokenVersion is the version of an engine dir whose gateway never comes up.
const brokenVersion = "2026.9.99"

// brokenEngineDir assembles an engine dir whose bin/openclaw tells its version and exits
// with an error for anything else: its gateway never becomes healthy.
func brokenEngineDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'OpenClaw " + brokenVersion + " (e2e-broken)'; exit 0; fi\n" +
		"echo 'this engine build is broken' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "openclaw"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRealEngineUpgradeWaves: on `agentplane dev` with the previous release (the default),
// the pinned one and a broken build, an EngineUpgrade moves two agents to the pinned release
// in two waves of one, each snapshotted first, their files intact; another EngineUpgrade to
// the broken build rolls its agent back to the previous release with the workspace of the
// snapshot (a file written after the snapshot is gone, one from before is there) and halts.
func TestRealEngineUpgradeWaves(t *testing.T) {
	pinned, previous := e2e.EngineDir(t), e2e.PreviousEngineDir(t)
	from, to := e2e.EngineVersion(t, previous), e2e.EngineVersion(t, pinned)
	created := time.Now()
	// No templates: the only new agents here are the three below, created at once on the
	// previous release before its template could be ready (each would start cold anyway), and an
	// upgrade restarts agents with homes, which are never born from one; the template's boot and
	// dump beside the three boots would only slow them.
	p := e2e.StartDev(t, pinned, "--engine-dir", previous, "--engine-dir", brokenEngineDir(t), "--default-engine-version", from,
		"--gateway-templates=false")
	t.Cleanup(func() { p.InterruptIfRunning() })
	k8s := p.KubeClient()
	ctx := context.Background()

	// Three agents on the previous release (created at once: each waits for its gateway),
	// each with a file in its workspace.
	groups := []string{"wave-1", "wave-2", "rollback"}
	ids := createAgentsAtOnce(t, p, "Upgrade ", groups)
	type agent struct{ id string }
	agents := map[string]agent{}
	for i, group := range groups {
		id := ids[i]
		e2e.Must(t, p.Call("POST", "/v0/agents/"+id+"/console/exec", map[string]string{"command": "echo " + group + " > before.txt"}), 200, "write before.txt")
		agents[group] = agent{id: id}
		label := "waves"
		if group == "rollback" {
			label = "rollback"
		}
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"e2e/upgrade":"`+label+`"}}}`))
		if err := k8s.Patch(ctx, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: id}}, patch); err != nil {
			t.Fatal(err)
		}
		if a := e2e.GetAgent(t, k8s, id); a.Status.EngineVersion != from {
			t.Fatalf("agent %s runs %q, want the previous release %s", id, a.Status.EngineVersion, from)
		}
	}
	t.Logf("three agents running on %s after %s", from, time.Since(created).Round(time.Second))
	// wave-1 sorts before wave-2 only by id: name the waves by the order the policy will use.
	first, second := agents["wave-1"], agents["wave-2"]
	if second.id < first.id {
		first, second = second, first
	}

	start := time.Now()
	for _, eu := range []*agentsv1.EngineUpgrade{
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-waves"}, Spec: agentsv1.EngineUpgradeSpec{
			Version: to, WavePercent: 50, HealthTimeout: &metav1.Duration{Duration: 3 * time.Minute},
			AgentSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e/upgrade": "waves"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "e2e-rollback"}, Spec: agentsv1.EngineUpgradeSpec{
			Version: brokenVersion, HealthTimeout: &metav1.Duration{Duration: 30 * time.Second},
			AgentSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e/upgrade": "rollback"}},
		}},
	} {
		if err := k8s.Create(ctx, eu); err != nil {
			t.Fatal(err)
		}
	}

	// The rollback agent: once its snapshot is recorded and its version changed, a file
	// written now is not in the snapshot.
	rb := agents["rollback"]
	var snapCID string
	e2e.Eventually(t, "the rollback agent to be snapshotted and moved to the broken build", func() bool {
		a := e2e.GetAgent(t, k8s, rb.id)
		snapCID = a.Annotations[agentsv1.AnnotationUpgradeSnapshot]
		return a.Annotations[agentsv1.AnnotationUpgradeState] == agentsv1.AgentUpgradeUpgrading && a.Spec.Engine.Version == brokenVersion
	})
	// Written on the host, in the agent's home (its gateway may be down meanwhile).
	rbWorkspace := filepath.Join(p.StateDir, "runtime", "agents", "dev", rb.id, "home", ".openclaw", "workspace")
	if err := os.WriteFile(filepath.Join(rbWorkspace, "after.txt"), []byte("written after the snapshot\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Waves: one agent each, the second only once the first runs the pinned release.
	waves := e2e.WaitUpgrade(t, k8s, "e2e-waves", agentsv1.UpgradeSucceeded)
	t.Logf("two agents upgraded %s -> %s in two waves in %s", from, to, time.Since(start).Round(time.Second))
	if len(waves.Status.Waves) != 2 || waves.Status.Counts.Upgraded != 2 ||
		waves.Status.Waves[0].Agents[0] != "dev/"+first.id || waves.Status.Waves[1].Agents[0] != "dev/"+second.id {
		t.Fatalf("waves: %+v counts %+v", waves.Status.Waves, waves.Status.Counts)
	}
	if !waves.Status.Waves[1].StartedAt.After(waves.Status.Waves[0].StartedAt.Time) {
		t.Fatalf("wave 2 started %s, not after wave 1 (%s)", waves.Status.Waves[1].StartedAt, waves.Status.Waves[0].StartedAt)
	}
	for _, ag := range []agent{first, second} {
		a := e2e.GetAgent(t, k8s, ag.id)
		if a.Status.EngineVersion != to || a.Status.Phase != agentsv1.AgentRunning {
			t.Fatalf("agent %s after the upgrade: %s on %q", ag.id, a.Status.Phase, a.Status.EngineVersion)
		}
		snap := e2e.CompletedSnapshot(t, k8s, ag.id, a.Annotations[agentsv1.AnnotationUpgradeSnapshot])
		t.Logf("agent %s: snapshot %s (%d bytes) before the upgrade", ag.id, snap.Status.CID, snap.Status.Size)
		r := e2e.Must(t, p.Call("POST", "/v0/agents/"+ag.id+"/console/exec", map[string]string{"command": "cat before.txt"}), 200, "read before.txt")
		if got := r.Str("stdout"); got != "wave-1\n" && got != "wave-2\n" {
			t.Fatalf("before.txt of %s after the upgrade: %q", ag.id, got)
		}
	}

	// Rollback: back on the previous release, the workspace of the snapshot, the policy halted.
	halted := e2e.WaitUpgrade(t, k8s, "e2e-rollback", agentsv1.UpgradeHalted)
	if halted.Status.Counts.RolledBack != 1 || len(halted.Status.FailedAgents) != 1 || halted.Status.FailedAgents[0] != "dev/"+rb.id {
		t.Fatalf("halted policy: counts %+v failed %v", halted.Status.Counts, halted.Status.FailedAgents)
	}
	e2e.CompletedSnapshot(t, k8s, rb.id, snapCID)
	e2e.Eventually(t, "the rolled-back agent to run the previous release on the restored workspace", func() bool {
		a := e2e.GetAgent(t, k8s, rb.id)
		return a.Spec.Engine.Version == "" && a.Status.EngineVersion == from && a.Status.Phase == agentsv1.AgentRunning &&
			a.Status.SnapshotCID == snapCID && a.Status.LastRestoreAt != nil
	})
	r := e2e.Must(t, p.Call("POST", "/v0/agents/"+rb.id+"/console/exec", map[string]string{"command": "cat before.txt; ls"}), 200, "list the restored workspace")
	if out := r.Str("stdout"); !strings.HasPrefix(out, "rollback\n") || strings.Contains(out, "after.txt") {
		t.Fatalf("restored workspace: %q (want before.txt, no after.txt)", out)
	}
	t.Logf("rollback from %s to %s with the snapshot's workspace, policy halted, %s in all", brokenVersion, from, time.Since(start).Round(time.Second))
	p.Stop()
}

// createAgentsAtOnce creates an agent per name (prefixed) through the REST door, all at once,
// and returns their ids once each runs (on a busy host a create may outlast its wait: 202).
func createAgentsAtOnce(t *testing.T, p *e2e.Platform, prefix string, names []string) []string {
	t.Helper()
	replies := make([]e2e.Reply, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = p.Call("POST", "/v0/agents", map[string]any{"name": prefix + name})
		}()
	}
	wg.Wait()
	ids := make([]string, len(names))
	for i, r := range replies {
		if r.Status != 201 {
			e2e.Must(t, r, 202, "create agent")
		}
		id := r.Obj("agent")["id"].(string)
		e2e.Eventually(t, "agent "+id+" to run", func() bool {
			got := p.Call("GET", "/v0/agents/"+id, nil)
			return got.Status == 200 && got.Obj("agent")["status"] == "running"
		})
		ids[i] = id
	}
	return ids
}
