package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/ops/recovery"
	"github.com/agentplane/agentplane/internal/platform"
)

// TestDoctor: on objects, homes and archives that agree, `agentplane doctor` says so and exits
// 0; a home no Agent names and an archive no Snapshot names make it list both (table and
// -o json) and exit non-zero; it deletes neither, with or without --repair.
func TestDoctor(t *testing.T) {
	cp, err := kubeenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	ctx := context.Background()
	const ws = "doc"
	if err := cp.Client.Create(ctx, kubeenv.Namespace(ws)); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ws}, Spec: agentsv1.WorkspaceSpec{Plan: agentsv1.PlanFree}}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(ctx, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a1", Namespace: ws}, Spec: agentsv1.AgentSpec{DisplayName: "a1"}}); err != nil {
		t.Fatal(err)
	}
	state, files := t.TempDir(), t.TempDir()
	mkHome := func(name string) string {
		dir := filepath.Join(state, "agents", ws, name, "home")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	mkHome("a1")
	f := doctorFlags{runtime: platform.RuntimeLocal, runtimeDir: state, storageDir: files, output: "table"}
	run := func(f doctorFlags) (string, error) {
		var out, log bytes.Buffer
		err := runDoctor(ctx, cp.Config, f, &out, &log)
		return out.String() + log.String(), err
	}
	if out, err := run(f); err != nil || !strings.Contains(out, "1 agents, 1 homes") || !strings.Contains(out, "all agree") {
		t.Fatalf("doctor on what agrees: %v\n%s", err, out)
	}

	orphan := mkHome("gone")
	store, err := localStorage(files)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := store.Put(ctx, storage.SnapshotSpace(ws), strings.NewReader("an archive no Snapshot names"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(f)
	if !errors.Is(err, errDisagree) || !strings.Contains(out, "OrphanHome") || !strings.Contains(out, "UnlinkedArchive") || !strings.Contains(out, "2 disagree") {
		t.Fatalf("doctor on what disagrees: %v\n%s", err, out)
	}
	f.output, f.repair = "json", true
	out, err = run(f)
	var rep recovery.Report
	if !errors.Is(err, errDisagree) || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Findings) != 2 {
		t.Fatalf("doctor -o json --repair: %v\n%s", err, out)
	}
	if rep.Findings[0].Kind != recovery.OrphanHome || rep.Findings[0].Name != "gone" || rep.Findings[1].Kind != recovery.UnlinkedArchive || rep.Findings[1].Name != archive.CID {
		t.Fatalf("findings: %+v", rep.Findings)
	}
	if _, err := os.Stat(orphan); err != nil {
		t.Fatalf("the orphan home after doctor --repair: %v", err)
	}
	if _, err := store.Stat(ctx, storage.SnapshotSpace(ws), archive.CID); err != nil {
		t.Fatalf("the unlinked archive after doctor --repair: %v", err)
	}
}
