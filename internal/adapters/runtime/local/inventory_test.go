package local_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// TestHomesKeptByName: the local runtime keeps a home by the agent's namespace and name, not
// its UID. Homes lists it, also to a reader beside the running runtime (ListHomes, what
// `agentplane doctor` runs); the Agent re-created with the same name (a new UID, as after a
// restore) finds its files; Delete takes it out of the list.
func TestHomesKeptByName(t *testing.T) {
	f := newFixture(t)
	a := newAgent("restored")
	d := desired("tok-restored-0123456789")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	marker := filepath.Join(openclaw.WorkspaceDir, "kept.md")
	if err := f.rt.WriteFile(t.Context(), a, marker, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	want := runtime.Home{Namespace: a.Namespace, Name: a.Name, Location: filepath.Join(f.rt.AgentDir(keyOf(a)), "home")}
	homes, err := f.rt.Homes(t.Context())
	if err != nil || !slices.Equal(homes, []runtime.Home{want}) {
		t.Fatalf("Homes = %+v, %v; want %+v", homes, err, want)
	}
	if beside, err := local.ListHomes(t.Context(), filepath.Dir(filepath.Dir(filepath.Dir(f.rt.AgentDir(keyOf(a)))))); err != nil || !slices.Equal(beside, homes) {
		t.Fatalf("ListHomes beside the runtime = %+v, %v", beside, err)
	}

	again := a.DeepCopy()
	again.UID += "-recreated"
	waitPhase(t, f, again, d, runtime.PhaseRunning)
	if got, err := f.rt.ReadFile(t.Context(), again, marker); err != nil || string(got) != "kept" {
		t.Fatalf("the re-created agent reads %q, %v; want its old file", got, err)
	}
	if err := f.rt.Delete(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if homes, err := f.rt.Homes(t.Context()); err != nil || len(homes) != 0 {
		t.Fatalf("Homes after Delete = %+v, %v", homes, err)
	}
	if _, err := os.Stat(want.Location); !os.IsNotExist(err) {
		t.Fatalf("the home after Delete: %v", err)
	}
}
