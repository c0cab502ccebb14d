package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCRIUThatHangsIsCutOff: a CRIU run that never ends (as a restore whose gateway died
// mid-detach can) fails after the checkpointer's timeout, with the process it started gone,
// instead of holding the agent's wake forever.
func TestCRIUThatHangsIsCutOff(t *testing.T) {
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child.pid")
	criu := filepath.Join(dir, "criu")
	// A child that holds the output pipe and outlives CRIU's own kill, then a wait on it.
	script := "#!/bin/sh\nsleep 300 &\necho $! > " + childPID + "\nwait\n"
	if err := os.WriteFile(criu, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &checkpointer{criu: criu, timeout: time.Second}
	_, err := c.restore(context.Background(), dir, dir, nil)
	if err == nil || !strings.Contains(err.Error(), "cut off after 1s") {
		t.Fatalf("restore by a CRIU that hangs: %v, want cut off after 1s", err)
	}
	b, err := os.ReadFile(childPID)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Kill(pid, 0) == nil {
		if stat, err := readProcStat(pid); err == nil && stat.state == 'Z' {
			break // killed, not yet reaped by init
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRIU's child %d is still running", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
