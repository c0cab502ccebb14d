package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// realCgroups are this machine's cgroups, with the runtime's defaults (root).
func realCgroups(t *testing.T) *cgroups {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "cgroups need root")
	}
	cg, err := newCgroups(cgroupRoot, DefaultMemoryLimit, DefaultPidsLimit)
	if err != nil {
		testenv.Skip(t, "no cgroups here: %v", err)
	}
	return cg
}

// TestCgroupOrphansAreSwept: a runtime killed before its sweep leaves its agents' cgroups; the
// next runtime to start removes the empty ones whose uid no home holds, and keeps the others.
func TestCgroupOrphansAreSwept(t *testing.T) {
	cg := realCgroups(t)
	const orphan, held = 2100000001, 2100000002 // above every allocated uid's range
	for _, uid := range []int{orphan, held} {
		if _, err := cg.join(uid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { cg.sweep(t.Context(), false) })
	cg.sweepOrphans(func(uid int) bool { return uid == held })
	for _, parent := range cg.dirs {
		if _, err := os.Stat(filepath.Join(parent, cgroupName(orphan))); !os.IsNotExist(err) {
			t.Errorf("the orphan's cgroup in %s is still there (%v)", parent, err)
		}
		if _, err := os.Stat(filepath.Join(parent, cgroupName(held))); err != nil {
			t.Errorf("the held uid's cgroup in %s went: %v", parent, err)
		}
	}
}

// TestStragglersInACgroupAreEnded: what is left in an agent's cgroup once its gateway and
// commands were stopped (a sandbox whose starter was killed waits forever) is killed before its
// home and cgroup are removed; a process outside the cgroup is left alone.
func TestStragglersInACgroupAreEnded(t *testing.T) {
	cg := realCgroups(t)
	const uid = 2100000003 // above every allocated uid's range
	procs, err := cg.join(uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.sweep(t.Context(), false) })
	start := func(into []string) *exec.Cmd {
		// It ignores SIGTERM, as a straggler may.
		cmd := exec.Command("/bin/sh", "-c", "trap '' TERM; read -r _")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = stdin.Close(); _ = cmd.Wait() })
		for _, p := range into {
			if err := os.WriteFile(p, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return cmd
	}
	straggler, bystander := start(procs), start(nil)
	if got := cg.procsOf(uid); !slices.Equal(got, []int{straggler.Process.Pid}) {
		t.Fatalf("the cgroup holds %v, want the straggler %d", got, straggler.Process.Pid)
	}
	cg.end(t.Context(), uid)
	if got := cg.procsOf(uid); len(got) > 0 {
		t.Fatalf("the cgroup still holds %v", got)
	}
	if err := straggler.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the straggler ended with %v, want killed", err)
	}
	if err := bystander.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a process outside the cgroup was ended too: %v", err)
	}
	cg.remove(uid)
	for _, parent := range cg.dirs {
		if _, err := os.Stat(filepath.Join(parent, cgroupName(uid))); !os.IsNotExist(err) {
			t.Errorf("the cgroup in %s is still there (%v)", parent, err)
		}
	}
}
