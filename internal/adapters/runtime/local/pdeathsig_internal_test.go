package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary, run again as a child, be the "manager" of
// TestCommandDiesWithTheManager: it runs a long command through runCommand and never returns.
const helperEnv = "AGENTPLANE_TEST_COMMAND_MANAGER"

// TestCommandDiesWithTheManager: a command the runtime runs (a console exec, an engine
// command) does not outlive a manager killed with SIGKILL while it runs: nothing is left for
// the next manager to find.
func TestCommandDiesWithTheManager(t *testing.T) {
	if pidFile := os.Getenv(helperEnv); pidFile != "" {
		_, _ = runCommand(context.Background(), commandSpec{path: "/bin/sh", args: []string{"-c", "echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + " && exec sleep 300"},
			env: []string{"PATH=/usr/bin:/bin"}, timeout: 10 * time.Minute})
		os.Exit(0)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	manager := exec.Command(os.Args[0], "-test.run=^TestCommandDiesWithTheManager$")
	manager.Env = append(os.Environ(), helperEnv+"="+pidFile)
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = manager.Process.Kill()
			t.Fatal("the command did not start")
		}
		if raw, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		}
	}
	if err := manager.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = manager.Wait()
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the command (pid %d) outlived its manager", pid)
		}
	}
}
