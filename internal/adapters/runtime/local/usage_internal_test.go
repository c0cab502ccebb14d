package local

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The fleet view's memory and CPU: read from a v2 cgroup's files, and from a v1 host's
// memory hierarchy with the CPU time of the cgroup's processes when cpuacct is apart.
func TestCgroupUsageReadsV2AndV1(t *testing.T) {
	root := t.TempDir()
	v2 := &cgroups{v2: true, dirs: []string{filepath.Join(root, "v2", cgroupParent)}}
	writeFiles(t, filepath.Join(v2.dirs[0], cgroupName(7)), map[string]string{
		"memory.current": "1048576\n", "memory.max": "max\n", "cpu.stat": "usage_usec 2500000\nuser_usec 2000000\n",
	})
	u, ok := v2.usage(7)
	if !ok || u.MemoryBytes != 1<<20 || u.MemoryLimitBytes != 0 || !u.CPUKnown || u.CPUSeconds != 2.5 {
		t.Errorf("v2: %+v %v", u, ok)
	}
	if _, ok := v2.usage(8); ok {
		t.Error("v2: a uid without a cgroup is measured")
	}

	v1 := &cgroups{dirs: []string{filepath.Join(root, "memory", cgroupParent), filepath.Join(root, "pids", cgroupParent)}}
	writeFiles(t, filepath.Join(v1.dirs[0], cgroupName(7)), map[string]string{
		"memory.usage_in_bytes": "2097152", "memory.limit_in_bytes": "3221225472",
		"cgroup.procs": strconv.Itoa(os.Getpid()) + "\n",
	})
	// This process is the cgroup's: it works until its CPU time shows (a tick is 10 ms).
	for deadline, x := time.Now().Add(time.Minute), 0; time.Now().Before(deadline); x++ {
		if u, _ = v1.usage(7); u.CPUSeconds > 0 {
			break
		}
		for i := range 1 << 20 {
			x ^= i * x
		}
	}
	u, ok = v1.usage(7)
	if !ok || u.MemoryBytes != 2<<20 || u.MemoryLimitBytes != 3<<30 || !u.CPUKnown || u.CPUSeconds <= 0 {
		t.Errorf("v1 (this test's process in the cgroup): %+v %v", u, ok)
	}
}
