package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// boundedHomes is a sandboxing fixture whose agents' homes hold size bytes.
func boundedHomes(t *testing.T, size int64) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "a volume per home needs the manager to run as root")
	}
	f := newFixture(t, func(o *local.Options) {
		o.Sandbox = local.SandboxRequired
		o.HomeSize = size
	})
	if ok, why := f.rt.HomeLimit(); !ok {
		t.Fatalf("the homes have no size limit as root: %s", why)
	}
	return f
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range mounts {
		out = append(out, m.Mountpoint)
	}
	return out
}

// TestAgentHomeIsBounded: code in an agent that writes twice its home's size gets "No space
// left on device" at the size, in its own home only: its gateway keeps running, the
// manager's writes into the full home fail with ErrNoSpace (the facade's storage error)
// and work again once the agent frees space, and another agent writes as before.
func TestAgentHomeIsBounded(t *testing.T) {
	const size = 64 << 20
	f := boundedHomes(t, size)
	a := newAgent("filler")
	d := desired("filler-gateway-token-0123456789ab")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	pid := gatewayPID(t, f, a)
	stoppedAgent(t, f, "neighbour", nil)

	res := sh(t, f, "filler", "head -c "+strconv.Itoa(2*size)+" /dev/zero > ~/fill; echo exit=$?")
	if !strings.Contains(string(res.Stdout), "exit=1") || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("writing %d bytes into a %d-byte home: %q %q, want the write refused for space", 2*size, size, res.Stdout, res.Stderr)
	}
	home := filepath.Join(f.rt.AgentDir(keyOf(a)), "home")
	if info, err := os.Stat(filepath.Join(home, "fill")); err != nil || info.Size() > size {
		t.Fatalf("the filler's file: %v (%v), want at most %d bytes", info, err, size)
	}
	// The host's disk lost what the home holds and a few MiB of metadata, no more.
	var img syscall.Stat_t
	if err := syscall.Stat(filepath.Join(f.rt.AgentDir(keyOf(a)), "home.img"), &img); err != nil {
		t.Fatal(err)
	}
	if used := img.Blocks * 512; used > size+8<<20 {
		t.Fatalf("the home's image takes %d bytes of the host's disk, want at most its size %d and 8 MiB", used, size)
	}

	err := f.rt.WriteFile(context.Background(), a, ".openclaw/workspace/notes.md", make([]byte, 1<<20))
	if !errors.Is(err, runtime.ErrNoSpace) {
		t.Fatalf("the manager's write into a full home: %v, want ErrNoSpace", err)
	}
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseRunning || gatewayPID(t, f, a) != pid {
		t.Fatalf("the gateway of the agent with a full home: %s (%s), pid %d, want still running as %d", o.Phase, o.Message, gatewayPID(t, f, a), pid)
	}
	if res := sh(t, f, "neighbour", "head -c 1048576 /dev/zero > ~/ok && echo wrote"); strings.TrimSpace(string(res.Stdout)) != "wrote" {
		t.Fatalf("another agent's write beside the full home: %q %q", res.Stdout, res.Stderr)
	}
	if res := sh(t, f, "filler", "rm ~/fill && echo freed"); strings.TrimSpace(string(res.Stdout)) != "freed" {
		t.Fatalf("freeing the home: %q %q", res.Stdout, res.Stderr)
	}
	if err := f.rt.WriteFile(context.Background(), a, ".openclaw/workspace/notes.md", []byte("# notes\n")); err != nil {
		t.Fatalf("the manager's write once the agent freed its home: %v", err)
	}
}

// TestHomeVolumesKeepTheirFilesAndLeaveNoMount: a home's files live in its volume across a
// manager's restart (its volume mounted again on first use); a deleted agent and a runtime
// that stops its gateways leave no mount behind.
func TestHomeVolumesKeepTheirFilesAndLeaveNoMount(t *testing.T) {
	f := boundedHomes(t, 32<<20)
	stoppedAgent(t, f, "kept", nil)
	stoppedAgent(t, f, "gone", nil)
	a := newAgent("kept")
	if err := f.rt.WriteFile(context.Background(), a, ".openclaw/workspace/keep.md", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if got := mountsUnder(t, f.opts.StateDir); len(got) != 2 {
		t.Fatalf("mounts under the state dir with two agents: %q, want their two homes", got)
	}
	if err := f.rt.Delete(context.Background(), newAgent("gone")); err != nil {
		t.Fatal(err)
	}
	if got := mountsUnder(t, f.opts.StateDir); len(got) != 1 || !strings.HasSuffix(got[0], "/kept/home") {
		t.Fatalf("mounts after one agent's deletion: %q, want the other's home only", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mountsUnder(t, f.opts.StateDir); len(got) != 0 {
		t.Fatalf("mounts after Shutdown: %q, want none", got)
	}
	next := newFixtureWith(t, f.opts)
	if got, err := next.rt.ReadFile(context.Background(), a, ".openclaw/workspace/keep.md"); err != nil || string(got) != "kept" {
		t.Fatalf("the file after a manager restart: %q (%v), want kept", got, err)
	}
}

// TestHomeMadeBeforeVolumesMovesIntoOne: a home a manager made before homes had a size is
// moved into a volume of its own when its agent is next loaded with nothing running in it:
// files, modes and links as they were; one too big for the size stays as it was (unbounded,
// logged), and neither leaves anything beside it.
func TestHomeMadeBeforeVolumesMovesIntoOne(t *testing.T) {
	f := boundedHomes(t, 32<<20)
	made := func(name string, size int) string {
		home := filepath.Join(f.rt.AgentDir(keyOf(newAgent(name))), "home")
		ws := filepath.Join(home, ".openclaw", "workspace")
		if err := os.MkdirAll(ws, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "data.bin"), make([]byte, size), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("data.bin", filepath.Join(ws, "link")); err != nil {
			t.Fatal(err)
		}
		return home
	}
	small, big := made("small", 1<<20), made("big", 40<<20)
	stoppedAgent(t, f, "small", nil)
	stoppedAgent(t, f, "big", nil)

	mounts := mountsUnder(t, f.opts.StateDir)
	if len(mounts) != 1 || mounts[0] != small {
		t.Fatalf("mounts after loading a small and a too big home: %q, want the small one's only", mounts)
	}
	for _, home := range []string{small, big} {
		ws := filepath.Join(home, ".openclaw", "workspace")
		if info, err := os.Stat(filepath.Join(ws, "data.bin")); err != nil || info.Mode().Perm() != 0o640 {
			t.Errorf("%s: the file after the move: %v (%v), want it with mode 0640", home, info, err)
		}
		if target, err := os.Readlink(filepath.Join(ws, "link")); err != nil || target != "data.bin" {
			t.Errorf("%s: the link after the move: %q (%v)", home, target, err)
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(home), "home.*"))
		want := 0
		if home == small {
			want = 1 // its image
		}
		if len(left) != want {
			t.Errorf("%s: beside the home: %q, want %d entries", home, left, want)
		}
	}
	res := sh(t, f, "small", "head -c 67108864 /dev/zero > ~/fill; echo exit=$?")
	if !strings.Contains(string(res.Stdout), "exit=1") {
		t.Fatalf("the moved home takes a write twice its size: %q %q", res.Stdout, res.Stderr)
	}
}
