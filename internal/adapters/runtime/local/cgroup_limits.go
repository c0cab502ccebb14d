package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// cgLimits are one agent's cgroup limits: the runtime's defaults (Options.MemoryLimit,
// PidsLimit), or what the Agent's spec.resources says, as on kube: memory.limits (raised to
// memory.requests when that is more), cpu.limits as a quota and cpu.requests (else the cpu
// limit) as a weight against the other agents.
type cgLimits struct {
	mem, pids int64
	cpuShares int64 // the cpu request, 1024 per cpu (0: the kernel's default, one cpu's)
	cpuQuota  int64 // the cpu limit in microseconds per cpuPeriod (0: none)
}

// cpuPeriod is the cpu quota's period (µs), the kernel's default.
const cpuPeriod = 100000

func (c *cgroups) defaults() cgLimits { return cgLimits{mem: c.mem, pids: c.pids} }

// limitsOf are uid's limits: what an Ensure gave (given), else the defaults.
func (c *cgroups) limitsOf(uid int) (l cgLimits, given bool) {
	c.mu.Lock()
	l, given = c.lim[uid]
	c.mu.Unlock()
	if !given {
		l = c.defaults()
	}
	return l, given
}

// limitsFrom are the limits for an Agent's resources (nil: def), and the Node heap (MiB) its
// memory limit gives the gateway (0: the runtime's default).
func limitsFrom(res *agentsv1.AgentResources, def cgLimits) (cgLimits, int64) {
	l := def
	if res == nil {
		return l, 0
	}
	var heap int64
	if q, ok := res.Limits[corev1.ResourceMemory]; ok && q.Value() > 0 {
		l.mem = q.Value()
	}
	if q, ok := res.Requests[corev1.ResourceMemory]; ok && q.Value() > l.mem {
		l.mem = q.Value()
	}
	if l.mem != def.mem {
		heap = runtime.HeapMiB(l.mem)
	}
	lim, hasLim := res.Limits[corev1.ResourceCPU]
	req, hasReq := res.Requests[corev1.ResourceCPU]
	if hasLim && !hasReq {
		req, hasReq = lim, true
	}
	if hasReq {
		l.cpuShares = max(2, req.MilliValue()*1024/1000)
	}
	if hasLim {
		milli := max(lim.MilliValue(), req.MilliValue()) // a request above the limit raises it
		l.cpuQuota = max(1000, milli*cpuPeriod/1000)
	}
	return l, heap
}

// kind is the hierarchy parent is in: "v2", or v1's "memory", "pids" or "cpu".
func (c *cgroups) kind(parent string) string {
	if c.v2 {
		return "v2"
	}
	return filepath.Base(filepath.Dir(parent))
}

// files are the control files of a hierarchy kind and the values that set l, in order.
func (l cgLimits) files(kind string, cpu bool) [][2]string {
	shares, quotaV1, quotaV2 := int64(1024), "-1", "max"
	if l.cpuShares > 0 {
		shares = l.cpuShares
	}
	if l.cpuQuota > 0 {
		quotaV1 = strconv.FormatInt(l.cpuQuota, 10)
		quotaV2 = quotaV1
	}
	period := strconv.Itoa(cpuPeriod)
	switch kind {
	case "v2":
		f := [][2]string{{"memory.max", strconv.FormatInt(l.mem, 10)}, {"pids.max", strconv.FormatInt(l.pids, 10)}}
		if cpu {
			weight := min(10000, max(1, shares*100/1024)) // one cpu's request: the default 100
			f = append(f, [2]string{"cpu.weight", strconv.FormatInt(weight, 10)}, [2]string{"cpu.max", quotaV2 + " " + period})
		}
		return f
	case "memory":
		return [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(l.mem, 10)}}
	case "cpu":
		return [][2]string{{"cpu.shares", strconv.FormatInt(shares, 10)}, {"cpu.cfs_period_us", period}, {"cpu.cfs_quota_us", quotaV1}}
	}
	return [][2]string{{"pids.max", strconv.FormatInt(l.pids, 10)}}
}

// write sets the control files of the cgroup dir d.
func (c *cgroups) write(d string, files [][2]string) error {
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(d, f[0]), []byte(f[1]), 0o644); err != nil {
			return fmt.Errorf("cgroup limit %s=%s: %w", f[0], f[1], err)
		}
	}
	return nil
}

// setLimits makes l uid's limits, at once where its cgroup exists (a running agent's: a
// memory limit below what it uses may be refused by the kernel, which the error says).
func (c *cgroups) setLimits(uid int, l cgLimits) error {
	c.mu.Lock()
	old, had := c.lim[uid]
	c.lim[uid] = l
	c.mu.Unlock()
	if had && old == l {
		return nil
	}
	var errs []error
	for _, parent := range c.dirs {
		d := filepath.Join(parent, cgroupName(uid))
		if _, err := os.Stat(d); err != nil {
			continue // made with these limits by the next join
		}
		errs = append(errs, c.write(d, l.files(c.kind(parent), c.cpu)))
	}
	return errors.Join(errs...)
}

// applyResources gives home's cgroup the limits of the Agent's resources (as root), and
// returns the Node heap its memory limit gives the gateway (0: the default).
func (r *Runtime) applyResources(home string, res *agentsv1.AgentResources) (int64, error) {
	def := cgLimits{mem: r.opts.MemoryLimit, pids: r.opts.PidsLimit}
	if r.cg != nil {
		def = r.cg.defaults()
	}
	l, heap := limitsFrom(res, def)
	if r.cg == nil {
		return heap, nil
	}
	uid, err := r.sbx.uids.of(home)
	if err != nil {
		return heap, err
	}
	return heap, r.cg.setLimits(uid, l)
}
