package local

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// startTree starts sh -c script as the root of a process tree and ends it at cleanup.
func startTree(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("pkill", "-KILL", "-P", strconv.Itoa(cmd.Process.Pid)).Run()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

// TestSettle: a checkpoint waits for the sandbox to hold still. A tree that only sleeps
// settles; one that keeps spawning processes, or keeps a CPU busy, does not within the
// bound (and the dump then goes ahead, said by settle's false).
func TestSettle(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, script string
		settles      bool
	}{
		{"idle", "sleep 60 & wait", true},
		{"spawning", "while true; do sleep 0.1; done", false},
		{"busy", "while :; do :; done", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := startTree(t, tc.script)
			if got := settle(ctx, pid, 300*time.Millisecond, 3*time.Second, settleCPU); got != tc.settles {
				t.Fatalf("settle = %v, want %v", got, tc.settles)
			}
		})
	}
}
