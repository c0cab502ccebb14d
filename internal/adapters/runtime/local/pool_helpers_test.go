package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
)

const poolName = "warm"

// newPoolFixture is newFixture with a check, after the runtime's Shutdown, that no process of
// its state dir runs any more and that no member dir is left but those agents claimed (their
// homes: keep lists the agents' dirs whose recorded home may stay).
func newPoolFixture(t *testing.T, mutate ...func(*local.Options)) *fixture {
	t.Helper()
	stateDir := t.TempDir()
	t.Cleanup(func() { checkNoLeftovers(t, stateDir) }) // runs after the fixture's Shutdown
	return newFixture(t, append([]func(*local.Options){func(o *local.Options) { o.StateDir = stateDir }}, mutate...)...)
}

// checkNoLeftovers fails when a process carries the runtime's marker for a home under
// stateDir, or when a member dir is left that no agent's state records.
func checkNoLeftovers(t *testing.T, stateDir string) {
	t.Helper()
	if pids := markerProcs(stateDir); len(pids) > 0 {
		t.Errorf("processes of %s still run after Shutdown: %v", stateDir, pids)
	}
	referenced := map[string]bool{}
	states, _ := filepath.Glob(filepath.Join(stateDir, "agents", "*", "*", "state.json"))
	for _, s := range states {
		b, _ := os.ReadFile(s)
		for _, e := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(e), `"home": "`); ok {
				referenced[filepath.Dir(strings.TrimSuffix(strings.TrimSuffix(v, ","), `"`))] = true
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(stateDir, "pool", "*"))
	for _, d := range dirs {
		if !referenced[d] {
			t.Errorf("member dir %s left after Shutdown", d)
		}
	}
}

// markerProcs are the processes whose environment marks a home under stateDir.
func markerProcs(stateDir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains("\x00"+string(env), "\x00AGENTPLANE_AGENT_HOME="+stateDir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitPool polls the pool's status until ok holds.
func waitPool(t *testing.T, f *fixture, ok func(runtime.PoolStatus) bool) runtime.PoolStatus {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for {
		s := f.rt.PoolStatus(poolName)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool status not reached: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readyN(n int) func(runtime.PoolStatus) bool {
	return func(s runtime.PoolStatus) bool { return s.Ready == n && s.Booting == 0 }
}

// setPool sets the test pool and fails the test on error.
func setPool(t *testing.T, f *fixture, size int) {
	t.Helper()
	if err := f.rt.SetPool(context.Background(), poolName, runtime.PoolSpec{Version: version, Size: size}); err != nil {
		t.Fatal(err)
	}
}

// switchableEngine is the fake engine behind a script that, for warm gateways only (their
// marker is a home under /pool/), first sources the file memberEnv when it exists: a test
// writes `export FAKECLAW_...=...` there to change how the next members behave.
func switchableEngine(t *testing.T) (dir, memberEnv string) {
	t.Helper()
	fake := fakeclaw.MustEngineDir(t)
	dir = t.TempDir()
	memberEnv = filepath.Join(dir, "member.env")
	script := "#!/bin/sh\ncase \"$AGENTPLANE_AGENT_HOME\" in */pool/*) [ -f '" + memberEnv + "' ] && . '" + memberEnv + "' ;; esac\n" +
		"exec '" + filepath.Join(fake, "bin", "openclaw") + "' \"$@\"\n"
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "openclaw"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, memberEnv
}

// memberToken is the gateway token in a member's config.
func memberToken(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, ".openclaw", "openclaw.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), `"token": "`)
	tok, _, ok2 := strings.Cut(after, `"`)
	if !ok || !ok2 {
		t.Fatalf("no token in %s", b)
	}
	return tok
}

// member finds the member id among ms.
func member(t *testing.T, ms []local.PoolMember, id string) local.PoolMember {
	t.Helper()
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("member %s not in %+v", id, ms)
	return local.PoolMember{}
}
