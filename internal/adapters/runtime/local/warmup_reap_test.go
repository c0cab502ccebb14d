package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// TestDeadManagersWarmUpIsReaped: a compile-cache warm-up whose manager died (its staging dir
// no longer locked) is killed and its staging dir removed when the next runtime on that cache
// starts; a warm-up that a live manager holds the lock of is left alone, since platforms on
// one host may share the cache dir.
func TestDeadManagersWarmUpIsReaped(t *testing.T) {
	root := t.TempDir()
	dead, live := filepath.Join(root, ".warming-engine-dead"), filepath.Join(root, ".warming-engine-live")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(d, "home"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	deadProc, liveProc := markedSleep(t, filepath.Join(dead, "home")), markedSleep(t, filepath.Join(live, "home"))

	newFixture(t, func(o *local.Options) { o.CompileCacheDir = root })

	waitGone(t, deadProc.Process.Pid)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead manager's staging dir is still there: %v", err)
	}
	if !alive(liveProc.Process.Pid) {
		t.Error("a live manager's warm-up was killed")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live manager's staging dir: %v", err)
	}
}

// markedSleep starts a process that carries the runtime's marker for home, as a warm-up's do,
// and kills it at the end of the test.
func markedSleep(t *testing.T, home string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), local.MarkerEnv+"="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd
}
