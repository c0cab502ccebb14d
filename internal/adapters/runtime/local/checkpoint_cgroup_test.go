package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// TestCheckpointIsBlindToOtherCgroups: a cgroup made inside the gateway's and removed while
// it is checkpointed (on cgroup v1 a gateway shares the host's root cgroup in the hierarchies
// the runtime does not limit, where a kubelet on the same host makes and removes its pods'
// cgroups) is neither made again by the restore nor fails it. CRIU's default walked the whole
// subtree of each of the gateway's cgroups at the dump and made every cgroup it saw there
// again at the restore; when the kubelet removed such a pod cgroup again before CRIU wrote
// its properties, the restore failed: "cg: bad cgroup path:
// blkio/agentplane/kubepods/burstable/pod…/cgroup.clone_children".
func TestCheckpointIsBlindToOtherCgroups(t *testing.T) {
	f := checkpointing(t)
	a := newAgent("ckpt-cgroups")
	d := ckptDesired("tok-1")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	before := procCgroups(t, gatewayPID(t, f, a))
	planted := plantCgroups(t, gatewayPID(t, f, a))
	r := suspendAndResume(t, f, a, d, func(string) {
		for _, dir := range planted {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}
	})
	if r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("resume after %d cgroups beside the gateway's went = %+v, want reason %s", len(planted), r, agentsv1.ReasonRestoredFromCheckpoint)
	}
	for _, dir := range planted {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the restore made %s again (a cgroup it saw at the dump), or: %v", dir, err)
		}
	}
	// The restored gateway is in its agent's cgroups (its limits) as before, not in CRIU's.
	if after := procCgroups(t, gatewayPID(t, f, a)); after != before {
		t.Errorf("the restored gateway's cgroups:\n%s\nwant those it was dumped in:\n%s", after, before)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
}

func procCgroups(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// plantCgroups makes a cgroup inside each of process pid's cgroups (each hierarchy's), removed
// at the test's end unless the test did, and returns their dirs.
func plantCgroups(t *testing.T, pid int) []string {
	t.Helper()
	mounts := cgroupMounts(t)
	raw := procCgroups(t, pid)
	var planted []string
	for _, line := range strings.Split(strings.TrimSpace(raw), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		mnt, ok := mounts[parts[1]]
		if !ok {
			continue
		}
		dir := filepath.Join(mnt, parts[2], "agentplane-test-"+strings.ToLower(t.Name()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		planted = append(planted, dir)
	}
	if len(planted) == 0 {
		t.Fatalf("no cgroup hierarchy of process %d found mounted: %s", pid, raw)
	}
	return planted
}

// cgroupMounts maps the hierarchies' names in /proc/PID/cgroup (a v1 hierarchy's controllers
// joined by commas, or its name=..., and "" for v2) to where they are mounted at their root.
func cgroupMounts(t *testing.T) map[string]string {
	t.Helper()
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "blkio",
		"perf_event", "net_prio", "hugetlb", "pids", "rdma", "misc"} {
		known[c] = true
	}
	out := map[string]string{}
	for _, m := range mounts {
		if m.Root != "/" {
			continue
		}
		if m.FSType == "cgroup2" {
			out[""] = m.Mountpoint
			continue
		}
		var names []string
		for _, o := range strings.Split(m.VFSOptions, ",") {
			if known[o] || strings.HasPrefix(o, "name=") {
				names = append(names, o)
			}
		}
		out[strings.Join(names, ",")] = m.Mountpoint
	}
	return out
}
