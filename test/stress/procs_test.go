package stress

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/agentplane/agentplane/internal/adapters/loopfs"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// The local runtime starts every gateway with AGENTPLANE_AGENT_HOME=<StateDir>/agents/<ns>/<name>/home
// in its environment. Scanning /proc for it finds every gateway of a state dir, whether the
// runtime that started it still knows about it or not.
const markerEnv = "AGENTPLANE_AGENT_HOME="

// gatewayPIDs maps "<namespace>/<name>" to the pids of the live gateway processes of the
// agents under stateDir (zombies are not counted). A gateway is the top process that carries
// the agent's marker: a sandboxed gateway's bwrap (its init and the engine inside carry the
// marker too, as children of a marked process) or an unsandboxed engine process.
func gatewayPIDs(stateDir string) map[string][]int {
	out := map[string][]int{}
	for rest, pids := range markedPIDs(filepath.Join(stateDir, "agents")) {
		key := strings.TrimSuffix(rest, string(filepath.Separator)+"home")
		out[key] = append(out[key], pids...)
	}
	for key, pids := range out {
		top := pids[:0]
		for _, pid := range pids {
			if !slices.Contains(pids, parentOf(pid)) {
				top = append(top, pid)
			}
		}
		sort.Ints(top)
		out[key] = top
	}
	return out
}

// markedPIDs maps each home under dir (relative to dir) to the live processes whose marker
// names it.
func markedPIDs(dir string) map[string][]int {
	prefix := markerEnv + dir + string(filepath.Separator)
	out := map[string][]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		environ, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(environ), "\x00") {
			if rest, ok := strings.CutPrefix(kv, prefix); ok {
				out[rest] = append(out[rest], pid)
			}
		}
	}
	return out
}

// parentOf is pid's parent (0 when it cannot be read).
func parentOf(pid int) int {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(v))
			return ppid
		}
	}
	return 0
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// killGateways kills every process of every gateway under stateDir and returns the gateways'
// pids (nil when none ran). It kills each marked process and whatever else runs in the
// agents' cgroups, not only each gateway's process group: a checkpointable sandbox runs its
// init in a session of its own (bwrap --new-session), out of the group of the process the
// runtime started, and a fresh machine's run that failed midway left such sandboxes running.
// Once they are gone it releases what the runtime releases when it stops a gateway: the
// mounts under stateDir (an agent's home volume; its loop device goes with its last mount)
// and the agents' cgroups.
func killGateways(stateDir string) []int {
	var pids []int
	for _, ps := range gatewayPIDs(stateDir) {
		pids = append(pids, ps...)
	}
	if len(pids) == 0 {
		return nil
	}
	var marked []int
	for _, ps := range markedPIDs(filepath.Join(stateDir, "agents")) {
		marked = append(marked, ps...)
	}
	cgroups := agentCgroups(marked)
	_ = eventually(testenv.EventBound, 50*time.Millisecond, func() error {
		left := 0
		for _, pid := range slices.Concat(marked, cgroupProcs(cgroups)) {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d processes of the gateways still run", left)
		}
		return nil
	})
	unmountUnder(stateDir)
	for _, dir := range cgroups {
		_ = os.Remove(dir)
	}
	sort.Ints(pids)
	return pids
}

// agentCgroups are the local runtime's agent cgroups (under agentplane-agents) that pids run
// in, as directories of /sys/fs/cgroup (one per controller on cgroup v1).
func agentCgroups(pids []int) []string {
	var dirs []string
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || !strings.Contains(parts[2], "/agentplane-agents/") {
				continue
			}
			if parts[1] == "" { // cgroup v2
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", parts[2]))
				continue
			}
			for _, ctrl := range strings.Split(parts[1], ",") {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(ctrl, "name="), parts[2]))
			}
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// cgroupProcs are the processes in the cgroups dirs.
func cgroupProcs(dirs []string) []int {
	var pids []int
	for _, dir := range dirs {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// unmountUnder unmounts every mount under dir, the deepest first (loopfs.Unmount: lazily when
// still busy, so a home volume's loop device goes with its last user).
func unmountUnder(dir string) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return
	}
	slices.SortFunc(mounts, func(a, b *mountinfo.Info) int { return len(b.Mountpoint) - len(a.Mountpoint) })
	for _, m := range mounts {
		if m.Mountpoint != dir {
			_ = loopfs.Unmount(m.Mountpoint)
		}
	}
}

// recordedPID is the pid of the gateway the runtime recorded for an agent in its state.json
// (0 when none).
func recordedPID(stateDir, key string) int {
	b, err := os.ReadFile(filepath.Join(stateDir, "agents", key, "state.json"))
	if err != nil {
		return 0
	}
	var st struct {
		PID int `json:"pid"`
	}
	_ = json.Unmarshal(b, &st)
	return st.PID
}

// processWithArgs is the pid of a live process whose executable's base name is name and
// whose command line holds arg (0 when there is none).
func processWithArgs(name, arg string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) == name && slices.Contains(args, arg) {
			return pid
		}
	}
	return 0
}

// TestKillGatewaysReachesASandboxInASessionOfItsOwn: a gateway whose sandbox's init left its
// parent's process group and session (as bwrap --new-session does) is killed with it, so a
// failed test's cleanup leaves no sandbox running.
func TestKillGatewaysReachesASandboxInASessionOfItsOwn(t *testing.T) {
	state := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "init.pid")
	cmd := exec.Command("sh", "-c", `setsid sleep 600 & echo $! > "$1"; wait`, "sh", pidFile)
	cmd.Env = append(os.Environ(), markerEnv+filepath.Join(state, "agents", "ns", "agent", "home"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var init int
	if err := eventually(testenv.EventBound, 20*time.Millisecond, func() error {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		init, err = strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && !alive(init) {
			err = fmt.Errorf("the sandbox's init (pid %d) is not running", init)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(init, syscall.SIGKILL) })
	if got := killGateways(state); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("killGateways reported %v, want the gateway's top process [%d]", got, cmd.Process.Pid)
	}
	<-exited
	if alive(init) {
		t.Errorf("the sandbox's init (pid %d, in a session of its own) still runs", init)
	}
}
