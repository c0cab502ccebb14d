package local_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kdatCache is where CRIU keeps its probe of the kernel between runs (run as root).
const kdatCache = "/run/criu.kdat"

// CRIU probes the kernel at every start (about 60 ms here) unless it finds the probe an
// earlier run kept, and a wake runs CRIU twice (the pages server and the restore). Upstream
// keeps the probe only where /run is a tmpfs; the project's build (hack/criu/patches/0007)
// keeps it on any filesystem, ended with the boot's id, so that it never outlives the boot it
// describes, and leaves no temporary file behind.
func TestCRIUKeepsItsKernelProbeForTheBoot(t *testing.T) {
	criu := criuPath(t)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	boot = bytes.TrimSpace(boot)
	check := func(log string) string {
		t.Helper()
		cmd := exec.Command(criu, "check", "-v4", "-o", log)
		cmd.Dir = t.TempDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("criu check: %v\n%s", err, out)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dir := t.TempDir()
	// The first run probes when no earlier run of this build kept a probe in this boot.
	check(filepath.Join(dir, "first.log"))
	kept, err := os.ReadFile(kdatCache)
	if err != nil {
		t.Fatalf("CRIU kept no probe of the kernel: %v", err)
	}
	if !bytes.HasSuffix(kept, boot) {
		t.Fatalf("%s does not end with this boot's id %s", kdatCache, boot)
	}
	if second := check(filepath.Join(dir, "second.log")); !strings.Contains(second, "Loaded kdat cache from "+kdatCache) {
		t.Fatalf("the second run probed the kernel again; its log:\n%s", headLines(second, 20))
	}
	if left, _ := filepath.Glob(kdatCache + ".*.tmp"); len(left) > 0 {
		t.Fatalf("CRIU left its temporary files behind: %v", left)
	}
}

// headLines is the first n lines of s.
func headLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
