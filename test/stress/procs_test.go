package stress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
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

// killGateways kills the process group of every gateway under stateDir and returns their
// pids (nil when none ran).
func killGateways(stateDir string) []int {
	var pids []int
	for _, ps := range gatewayPIDs(stateDir) {
		for _, pid := range ps {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
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
