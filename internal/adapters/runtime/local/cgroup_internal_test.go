package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestCgroupOrphansAreSwept: a runtime killed before its sweep leaves its agents' cgroups; the
// next runtime to start removes the empty ones whose uid no home holds, and keeps the others.
func TestCgroupOrphansAreSwept(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "cgroups need root")
	}
	cg, err := newCgroups(cgroupRoot, DefaultMemoryLimit, DefaultPidsLimit)
	if err != nil {
		testenv.Skip(t, "no cgroups here: %v", err)
	}
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
