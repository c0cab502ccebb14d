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
// settles; one that keeps spawning processes, or keeps a CPU busy, does not within the bound
// (and the dump then goes ahead, said by settle's false). The sleeping tree is a real one;
// the other two are trees as settle reads them, so that how much of a CPU a busy loop gets
// on a loaded machine does not decide the verdict (on a busy CI machine a real loop got too
// little of one in a 300 ms window and the tree counted as idle).
func TestSettle(t *testing.T) {
	ctx := context.Background()
	t.Run("idle", func(t *testing.T) {
		pid := startTree(t, "sleep 60 & wait")
		if !settle(ctx, pid, 300*time.Millisecond, 3*time.Second, settleCPU) {
			t.Fatal("a tree that only sleeps did not settle")
		}
	})
	reads := 0
	for _, tc := range []struct {
		name string
		read func() (map[int]uint64, uint64)
	}{
		// A new process at every read.
		{"spawning", func() (map[int]uint64, uint64) { reads++; return map[int]uint64{1: 1, 1 + reads: uint64(reads)}, 0 }},
		// A second of CPU at every read (a tick is 100 ms): ten CPUs' worth, whatever the load.
		{"busy", func() (map[int]uint64, uint64) {
			reads++
			return map[int]uint64{1: 1}, uint64(reads) * uint64(clockTicks)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if settleTree(ctx, tc.read, 300*time.Millisecond, 3*time.Second, settleCPU) {
				t.Fatal("settled")
			}
		})
	}
}
