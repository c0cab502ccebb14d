package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Every agent's sandboxes (its gateway, its console execs and engine commands) run in a cgroup
// of their own when the manager is root: the agent's home has a machine-wide uid (uids.go),
// and its cgroup is named after it, so one agent's memory and pids are bounded together
// whatever it starts, and a fork bomb or a memory hog in it stops at its own limits instead of
// taking the machine from the other agents and the control plane. The runtime's own sandboxes
// (its probes and compile-cache warm-ups, warmUID) are not agents' and join none.
//
// cgroup v2 (one unified hierarchy with the memory and pids controllers) and v1 (a hierarchy
// per controller, as on hybrid hosts) are both served. As an ordinary user the runtime cannot
// make cgroups and says so at start.
const (
	// cgroupParent is the runtime's directory in each hierarchy (not the local cluster's
	// kubelet's /agentplane: that one's leftovers are checked apart).
	cgroupParent = "agentplane-agents"
	cgroupRoot   = "/sys/fs/cgroup"
	// DefaultMemoryLimit bounds an agent's memory (Options.MemoryLimit): above the gateway's
	// V8 heap (DefaultGatewayHeapMiB) with room for its isolates, child processes and /tmp.
	DefaultMemoryLimit = 3 << 30
	// DefaultPidsLimit bounds an agent's processes and threads (Options.PidsLimit): an idle
	// gateway runs about 60 threads.
	DefaultPidsLimit = 1024
)

// cgroups places agents' sandboxes into their cgroups.
type cgroups struct {
	// dirs are the parent dirs in each hierarchy with a controller the limits need (v2: one).
	dirs []string
	v2   bool
	mem  int64
	pids int64
	// cpu: the cpu controller is there too (cpu.shares or cpu.weight, a quota: the Agent's
	// resources; cgroup_limits.go).
	cpu bool

	mu sync.Mutex
	// made is the uids whose cgroups this runtime made and has not removed yet.
	made map[int]bool
	// lim are the limits of the agents whose resources an Ensure gave (setLimits); the others
	// get the defaults.
	lim map[int]cgLimits
}

// newCgroups finds the hierarchies with the memory and pids controllers; an error says why
// agents get no cgroups here.
func newCgroups(root string, memory, pids int64) (*cgroups, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("cgroups need the manager to run as root")
	}
	c := &cgroups{mem: memory, pids: pids, made: map[int]bool{}, lim: map[int]cgLimits{}}
	if raw, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		have := strings.Fields(string(raw))
		for _, want := range []string{"memory", "pids"} {
			if !slices.Contains(have, want) {
				return nil, fmt.Errorf("the cgroup v2 hierarchy lacks the %s controller", want)
			}
		}
		c.v2, c.dirs, c.cpu = true, []string{filepath.Join(root, cgroupParent)}, slices.Contains(have, "cpu")
		return c, nil
	}
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		d := filepath.Join(root, ctl)
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil {
			if ctl == "cpu" {
				break // optional: no cpu weight or quota per agent
			}
			return nil, fmt.Errorf("no cgroup v2 hierarchy and no v1 %s hierarchy at %s", ctl, d)
		}
		c.cpu = ctl == "cpu"
		c.dirs = append(c.dirs, filepath.Join(d, cgroupParent))
	}
	return c, nil
}

// name is the cgroup of the home with sandbox uid uid.
func cgroupName(uid int) string { return "uid-" + strconv.Itoa(uid) }

// join makes uid's cgroup in each hierarchy with the limits set, and returns the
// cgroup.procs files a sandbox's first process writes its pid into.
func (c *cgroups) join(uid int) ([]string, error) {
	if c.v2 {
		// The parent hands the controllers down to its children.
		if err := os.MkdirAll(c.dirs[0], 0o755); err != nil {
			return nil, err
		}
		if err := c.enableControllers(filepath.Dir(c.dirs[0])); err != nil {
			return nil, err
		}
		if err := c.enableControllers(c.dirs[0]); err != nil {
			return nil, err
		}
	}
	c.track(uid)
	l, given := c.limitsOf(uid)
	var procs []string
	for _, parent := range c.dirs {
		d := filepath.Join(parent, cgroupName(uid))
		_, err := os.Stat(d)
		made := errors.Is(err, os.ErrNotExist)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		// An existing cgroup keeps its limits until an Ensure gives the agent's: a command
		// run before it (a manager just restarted) must not shrink a running gateway's.
		if made || given {
			if err := c.write(d, l.files(c.kind(parent), c.cpu)); err != nil {
				return nil, err
			}
		}
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs, nil
}

// enableControllers lets dir's children use the memory, pids (and cpu) controllers (v2).
func (c *cgroups) enableControllers(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	on, want := strings.Fields(string(raw)), []string{"memory", "pids"}
	if c.cpu {
		want = append(want, "cpu")
	}
	var add []string
	for _, w := range want {
		if !slices.Contains(on, w) {
			add = append(add, "+"+w)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0o644)
}

// oomKills is how many times the kernel killed a process of uid's cgroup for its memory
// limit (0 when unknown).
func (c *cgroups) oomKills(uid int) int64 {
	for _, parent := range c.dirs {
		file := "memory.oom_control" // v1: "oom_kill N"
		if c.v2 {
			file = "memory.events" // v2: "oom_kill N"
		} else if filepath.Base(filepath.Dir(parent)) != "memory" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(parent, cgroupName(uid), file))
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
	}
	return 0
}

// remove removes uid's cgroup where it holds no process any more (rmdir refuses a cgroup with
// processes: a gateway that outlives the manager keeps its own).
func (c *cgroups) remove(uid int) {
	gone := true
	for _, parent := range c.dirs {
		if err := os.Remove(filepath.Join(parent, cgroupName(uid))); err != nil && !errors.Is(err, os.ErrNotExist) {
			gone = false
		}
	}
	if gone {
		c.mu.Lock()
		delete(c.made, uid)
		c.mu.Unlock()
	}
}

// sweep removes the cgroups this runtime made, then the parent dirs when nothing else is in
// them (another runtime's agents keep theirs). With wait (the runtime stopped every process
// it started) a cgroup whose last processes are still exiting is removed once they are gone,
// until ctx ends; without, a cgroup that still holds processes (gateways kept running) stays.
func (c *cgroups) sweep(ctx context.Context, wait bool) {
	c.mu.Lock()
	uids := make([]int, 0, len(c.made))
	for uid := range c.made {
		uids = append(uids, uid)
	}
	c.mu.Unlock()
	for _, uid := range uids {
		if wait {
			c.end(ctx, uid)
		}
		for c.remove(uid); wait && c.holds(uid); c.remove(uid) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for _, parent := range c.dirs {
		_ = os.Remove(parent)
	}
}

// end kills what is left in uid's cgroup and returns once it is empty (or ctx ends). It is
// called once the runtime stopped the agent's gateway and commands: a process left there is a
// straggler, such as a sandbox whose starter was killed before it let the sandbox go on (make
// test once left one waiting forever after the manager's kill -9). A straggler would keep the
// agent's home mounted and its cgroup in place.
func (c *cgroups) end(ctx context.Context, uid int) {
	for {
		pids := c.procsOf(uid)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// procsOf are the processes in uid's cgroup, in any hierarchy.
func (c *cgroups) procsOf(uid int) []int {
	var pids []int
	for _, parent := range c.dirs {
		raw, err := os.ReadFile(filepath.Join(parent, cgroupName(uid), "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// track makes uid's cgroup one this runtime removes (sweep).
func (c *cgroups) track(uid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.made[uid] = true
}

// sweepOrphans removes the empty cgroups whose uid no home holds any more (allocated reports
// whether one does): a runtime killed before its sweep leaves them (run at start).
func (c *cgroups) sweepOrphans(allocated func(uid int) bool) {
	for _, parent := range c.dirs {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			n, ok := strings.CutPrefix(e.Name(), "uid-")
			uid, err := strconv.Atoi(n)
			if !ok || err != nil || !e.IsDir() || allocated(uid) {
				continue
			}
			_ = os.Remove(filepath.Join(parent, e.Name())) // refused while it holds processes
		}
	}
}

// holds reports whether uid's cgroup still exists.
func (c *cgroups) holds(uid int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made[uid]
}

// cgroupWrap returns the command line that puts its own process into the cgroups whose
// cgroup.procs files are procs, then execs bin with args: the sandbox's first process (bwrap)
// is in the agent's cgroup before it starts anything, and all it starts inherits it.
func cgroupWrap(procs []string, bin string, args []string) (string, []string) {
	out := append([]string{"-c", cgroupScript, "sh"}, procs...)
	out = append(out, "--", bin)
	return "/bin/sh", append(out, args...)
}

const cgroupScript = `while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"`

// cgroupUnwrap is the command line cgroupWrap wrapped (bin and args as they are when they
// are not such a wrapper).
func cgroupUnwrap(bin string, args []string) (string, []string) {
	if bin != "/bin/sh" || len(args) < 3 || args[0] != "-c" || args[1] != cgroupScript {
		return bin, args
	}
	for i := 3; i+1 < len(args); i++ {
		if args[i] == "--" {
			return args[i+1], args[i+2:]
		}
	}
	return bin, args
}
