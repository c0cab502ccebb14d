package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

var _ runtime.Meter = (*Runtime)(nil)

// Usage reads the agents' cgroups (runtime.Meter): memory in use and its limit, CPU time.
// Only an agent this runtime supervises, with a running gateway, a uid allocated and cgroups
// in use, is measured; reading never allocates a uid nor starts anything.
func (r *Runtime) Usage(_ context.Context, namespace string, agents []*agentsv1.Agent) map[string]runtime.ResourceUsage {
	out := map[string]runtime.ResourceUsage{}
	if r.cg == nil || r.sbx == nil {
		return out
	}
	for _, ag := range agents {
		if u, ok := r.usageOf(types.NamespacedName{Namespace: namespace, Name: ag.Name}); ok {
			out[ag.Name] = u
		}
	}
	return out
}

func (r *Runtime) usageOf(key types.NamespacedName) (runtime.ResourceUsage, bool) {
	r.mu.Lock()
	a := r.agents[key]
	r.mu.Unlock()
	if a == nil {
		return runtime.ResourceUsage{}, false
	}
	a.mu.Lock()
	home, running := a.home, a.proc != nil
	a.mu.Unlock()
	if home == "" || !running {
		return runtime.ResourceUsage{}, false
	}
	uid, ok := r.sbx.uids.lookup(home)
	if !ok {
		return runtime.ResourceUsage{}, false
	}
	return r.cg.usage(uid)
}

// lookup is home's uid when one is allocated (never allocates).
func (t *uidTable) lookup(home string) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid, ok := t.byHome[filepath.Clean(home)]
	return uid, ok
}

// usage reads uid's cgroup: v2 memory.current, memory.max and cpu.stat's usage_usec; v1
// memory.usage_in_bytes, memory.limit_in_bytes and cpuacct.usage (nanoseconds).
func (c *cgroups) usage(uid int) (runtime.ResourceUsage, bool) {
	var u runtime.ResourceUsage
	read := func(dir, file string) (string, bool) {
		raw, err := os.ReadFile(filepath.Join(dir, cgroupName(uid), file))
		return strings.TrimSpace(string(raw)), err == nil
	}
	if c.v2 {
		cur, ok := read(c.dirs[0], "memory.current")
		if !ok {
			return u, false
		}
		u.MemoryBytes, _ = strconv.ParseInt(cur, 10, 64)
		if max, ok := read(c.dirs[0], "memory.max"); ok && max != "max" {
			u.MemoryLimitBytes, _ = strconv.ParseInt(max, 10, 64)
		}
		if st, ok := read(c.dirs[0], "cpu.stat"); ok {
			for _, line := range strings.Split(st, "\n") {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					us, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					u.CPUSeconds, u.CPUKnown = us/1e6, true
				}
			}
		}
		return u, true
	}
	measured := false
	for _, parent := range c.dirs {
		switch filepath.Base(filepath.Dir(parent)) {
		case "memory":
			cur, ok := read(parent, "memory.usage_in_bytes")
			if !ok {
				return u, false
			}
			measured = true
			u.MemoryBytes, _ = strconv.ParseInt(cur, 10, 64)
			if lim, ok := read(parent, "memory.limit_in_bytes"); ok {
				if n, err := strconv.ParseInt(lim, 10, 64); err == nil && n < 1<<62 {
					u.MemoryLimitBytes = n
				}
			}
		case "cpu":
			if ns, ok := read(parent, "cpuacct.usage"); ok {
				n, _ := strconv.ParseFloat(ns, 64)
				u.CPUSeconds, u.CPUKnown = n/1e9, true
			}
		}
	}
	if measured && !u.CPUKnown {
		u.CPUSeconds, u.CPUKnown = c.procsCPU(uid)
	}
	return u, measured
}

// userHZ is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on every Linux ABI).
const userHZ = 100

// procsCPU is the CPU time of the processes in uid's memory cgroup and of their children
// they waited for (v1 hosts whose cpuacct is not mounted with cpu). A process that ended
// takes its time with it: the rate over such a drop is not computed.
func (c *cgroups) procsCPU(uid int) (float64, bool) {
	for _, parent := range c.dirs {
		if filepath.Base(filepath.Dir(parent)) != "memory" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(parent, cgroupName(uid), "cgroup.procs"))
		if err != nil {
			return 0, false
		}
		var ticks int64
		for _, pid := range strings.Fields(string(raw)) {
			st, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
			if err != nil {
				continue // ended meanwhile
			}
			// The fields after the command's closing parenthesis: state is the 3rd field,
			// utime, stime, cutime and cstime the 14th to 17th.
			i := strings.LastIndexByte(string(st), ')')
			f := strings.Fields(string(st[i+1:]))
			if i < 0 || len(f) < 15 {
				continue
			}
			for _, v := range f[11:15] {
				n, _ := strconv.ParseInt(v, 10, 64)
				ticks += n
			}
		}
		return float64(ticks) / userHZ, true
	}
	return 0, false
}
