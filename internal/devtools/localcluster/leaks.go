package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// netnsDir is where containerd 1.6's CRI plugin mounts pod network namespaces.
const netnsDir = "/var/run/netns"

// shimSocketDir is where containerd's shims (runc's, and gVisor's runsc shim) make their
// ttrpc sockets, named by a hash of containerd's address and the container: a shim that is
// killed, or whose start containerd gave up on, leaves its socket there.
const shimSocketDir = "/run/containerd/s"

// drain deletes every pod and waits until the kubelet has stopped their containers and torn
// down their networks (the API object goes only once the kubelet confirms).
func (c *Cluster) drain(ctx context.Context) error {
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods); err != nil {
		return err
	}
	simulated := map[string]bool{}
	for i := range c.opts.SimulatedNodes {
		simulated[SimulatedNodeName(i)] = true
	}
	for i := range pods.Items {
		// Nothing runs for a pod on a simulated node: it goes at once.
		grace := int64(5)
		if simulated[pods.Items[i].Spec.NodeName] {
			grace = 0
		}
		_ = client.IgnoreNotFound(c.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(grace)))
	}
	return waitFor(ctx, "pods to be gone", 90*time.Second, c.kubelet, func() error {
		if err := c.Client.List(ctx, &pods); err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods remain (first %s/%s)", n, pods.Items[0].Namespace, pods.Items[0].Name)
		}
		return nil
	})
}

// sweep removes what stopped components can leave after a crash: processes (shims) of the
// cluster, mounts under its directory, network namespaces and shim sockets it created, its
// bridge, its iptables rules, its firewall's ipsets and its cgroups.
func (c *Cluster) sweep(ctx context.Context) []error {
	var errs []error
	for _, pid := range c.processes() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(100 * time.Millisecond)
	for _, m := range c.mounts() {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	for _, ns := range c.newNetns() {
		_ = syscall.Unmount(ns, syscall.MNT_DETACH)
		if err := os.Remove(ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range c.newShimSockets() {
		if err := os.Remove(s); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	if _, err := net.InterfaceByName(Bridge); err == nil {
		if _, err := run(ctx, "ip", "link", "delete", Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.removeChains(ctx)...)
	errs = append(errs, c.removeIPSets(ctx)...)
	for _, l := range c.containerLogLinks() {
		if err := os.Remove(l); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range c.newCgroups() {
		if err := removeCgroup(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Leftovers lists what of the cluster is still on the machine; empty after a clean Stop.
func (c *Cluster) Leftovers() []string { return Leftovers(c.Dir, c.baseline) }

// Baseline is what the machine had before a cluster started (network namespaces, cgroups,
// shim sockets), so that only what the cluster added counts as left behind.
type Baseline struct{ netns, cgroups, chains, ipsets, shimSockets map[string]bool }

// TakeBaseline records the machine's network namespaces, cgroups and iptables chains now.
func TakeBaseline() Baseline {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := Baseline{netns: netnsSet(), cgroups: cgroupSet(), chains: map[string]bool{}, ipsets: map[string]bool{}, shimSockets: shimSocketSet()}
	for _, ch := range allChains(ctx) {
		b.chains[ch.String()] = true
	}
	for _, s := range allIPSets(ctx) {
		b.ipsets[s] = true
	}
	return b
}

// LeftoversAfterStop is Leftovers from outside a cluster: it holds the machine's cluster lock
// while it looks, so that a cluster starting meanwhile (another test's) is not counted.
func LeftoversAfterStop(dir string, b Baseline) ([]string, error) {
	unlock, err := Lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return Leftovers(dir, b), nil
}

// Leftovers lists what a cluster whose state directory was dir left on the machine since
// the baseline b: processes, mounts, network namespaces, shim sockets, the bridge, iptables
// rules and chains of the pod network, of kube-proxy and of the firewall, its ipsets, cgroups,
// and the kubelet's container log links.
func Leftovers(dir string, b Baseline) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &Cluster{Dir: dir, baseline: b}
	var left []string
	for _, pid := range c.processes() {
		left = append(left, "process "+strconv.Itoa(pid)+" "+cmdline(pid))
	}
	for _, m := range c.mounts() {
		left = append(left, "mount "+m)
	}
	for _, ns := range c.newNetns() {
		left = append(left, "network namespace "+ns)
	}
	for _, s := range c.newShimSockets() {
		left = append(left, "shim socket "+s)
	}
	if _, err := net.InterfaceByName(Bridge); err == nil {
		left = append(left, "bridge "+Bridge)
	}
	for _, ch := range c.newChains(ctx) {
		left = append(left, "iptables chain "+ch.String())
	}
	for _, r := range masqueradeRules(ctx) {
		left = append(left, "iptables rule "+r)
	}
	for _, s := range c.newIPSets(ctx) {
		left = append(left, "ipset "+s)
	}
	for _, d := range c.newCgroups() {
		left = append(left, "cgroup "+d)
	}
	for _, l := range c.containerLogLinks() {
		left = append(left, "container log link "+l)
	}
	return left
}

// containerLogDir is where the kubelet links each container's log (a fixed path, unlike the
// logs themselves, which podLogsDir keeps in the cluster's directory).
const containerLogDir = "/var/log/containers"

// containerLogLinks are the kubelet's links into the cluster's directory.
func (c *Cluster) containerLogLinks() []string {
	entries, _ := os.ReadDir(containerLogDir)
	var links []string
	for _, e := range entries {
		p := filepath.Join(containerLogDir, e.Name())
		if dst, err := os.Readlink(p); err == nil && strings.HasPrefix(dst, c.Dir+string(filepath.Separator)) {
			links = append(links, p)
		}
	}
	return links
}

// processes are the live processes whose command line names the cluster's directory
// (containerd, its shims, the kubelet and the controllers all do).
func (c *Cluster) processes() []int {
	if c.Dir == "" {
		return nil // every command line "contains" the empty string
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if strings.Contains(cmdline(pid), c.Dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// mounts are the mount points under the cluster's directory, deepest first.
func (c *Cluster) mounts() []string {
	found, err := mountinfo.GetMounts(mountinfo.PrefixFilter(c.Dir))
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range found {
		if m.Mountpoint != c.Dir {
			out = append(out, m.Mountpoint)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func netnsSet() map[string]bool {
	set := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		set[filepath.Join(netnsDir, e.Name())] = true
	}
	return set
}

// newNetns are the CRI network namespaces that appeared since Start.
func (c *Cluster) newNetns() []string {
	var out []string
	for ns := range netnsSet() {
		if !c.baseline.netns[ns] && strings.HasPrefix(filepath.Base(ns), "cni-") {
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return out
}

func shimSocketSet() map[string]bool {
	set := map[string]bool{}
	entries, _ := os.ReadDir(shimSocketDir)
	for _, e := range entries {
		set[filepath.Join(shimSocketDir, e.Name())] = true
	}
	return set
}

// newShimSockets are the shim sockets that appeared since the baseline; none without one
// (the directory is shared by every containerd on the machine, and its names do not say
// whose they are).
func (c *Cluster) newShimSockets() []string {
	if c.baseline.shimSockets == nil {
		return nil
	}
	var out []string
	for s := range shimSocketSet() {
		if !c.baseline.shimSockets[s] {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// cgroupDirs are the kubelet's cgroupRoot in each cgroup v1 hierarchy (and v2's unified one).
func cgroupDirs() []string {
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", strings.TrimPrefix(cgroupRoot, "/")))
	return matches
}

func cgroupSet() map[string]bool {
	set := map[string]bool{}
	for _, d := range cgroupDirs() {
		set[d] = true
	}
	return set
}

func (c *Cluster) newCgroups() []string {
	var out []string
	for _, d := range cgroupDirs() {
		if !c.baseline.cgroups[d] {
			out = append(out, d)
		}
	}
	return out
}

// removeCgroup removes a cgroup directory tree, children first (cgroup directories hold only
// control files, which rmdir removes with them).
func removeCgroup(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroup(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// chain is an iptables (or ip6tables) chain of a table.
type chain struct{ cmd, table, name string }

func (c chain) String() string { return c.cmd + " -t " + c.table + " " + c.name }

var chainTables = []string{"filter", "nat", "mangle", "raw"}

// allChains are the user-defined chains of the kinds the cluster creates: the kubelet's and
// kube-proxy's (KUBE-) and the CNI plugins' (CNI-).
func allChains(ctx context.Context) []chain {
	var out []chain
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, t := range chainTables {
			rules, err := run(ctx, cmd, "-t", t, "-S")
			if err != nil {
				continue
			}
			for _, l := range strings.Split(rules, "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == "-N" && (strings.HasPrefix(f[1], "KUBE-") || strings.HasPrefix(f[1], "CNI-")) {
					out = append(out, chain{cmd, t, f[1]})
				}
			}
		}
	}
	return out
}

// newChains are the chains that appeared since the baseline.
func (c *Cluster) newChains(ctx context.Context) []chain {
	var out []chain
	for _, ch := range allChains(ctx) {
		if !c.baseline.chains[ch.String()] {
			out = append(out, ch)
		}
	}
	return out
}

// removeChains deletes the rules that jump to the cluster's new chains or masquerade its pod
// network, then the chains. Rules are deleted by number (the last first): their text has
// quoted comments that do not survive a split into arguments.
func (c *Cluster) removeChains(ctx context.Context) []error {
	var errs []error
	chains := c.newChains(ctx)
	ours := map[string]bool{}
	for _, ch := range chains {
		ours[ch.String()] = true
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, t := range chainTables {
			rules, err := run(ctx, cmd, "-t", t, "-S")
			if err != nil {
				continue
			}
			num := map[string]int{}
			type rule struct {
				chain string
				n     int
			}
			var doomed []rule
			for _, l := range strings.Split(rules, "\n") {
				f := strings.Fields(l)
				if len(f) < 2 || f[0] != "-A" {
					continue
				}
				num[f[1]]++
				if ours[chain{cmd, t, f[1]}.String()] {
					continue // goes with its chain
				}
				jumps := false
				for i := 2; i+1 < len(f); i++ {
					if (f[i] == "-j" || f[i] == "-g") && ours[chain{cmd, t, f[i+1]}.String()] {
						jumps = true
					}
				}
				if jumps || (t == "nat" && isMasquerade(l)) {
					doomed = append(doomed, rule{f[1], num[f[1]]})
				}
			}
			for i := len(doomed) - 1; i >= 0; i-- {
				if _, err := run(ctx, cmd, "-t", t, "-D", doomed[i].chain, strconv.Itoa(doomed[i].n)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, ch := range chains {
		_, _ = run(ctx, ch.cmd, "-t", ch.table, "-F", ch.name)
	}
	for _, ch := range chains {
		if _, err := run(ctx, ch.cmd, "-t", ch.table, "-X", ch.name); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// masqueradeRules are the nat POSTROUTING rules for the pod network (the bridge plugin's
// masquerade jumps), as `iptables -S` prints them.
func masqueradeRules(ctx context.Context) []string {
	out, err := run(ctx, "iptables", "-t", "nat", "-S", "POSTROUTING")
	if err != nil {
		return nil
	}
	var rules []string
	for _, l := range strings.Split(out, "\n") {
		if isMasquerade(l) {
			rules = append(rules, l)
		}
	}
	return rules
}

// podNet is the pod network's address prefix as iptables prints it.
var podNet = strings.TrimSuffix(PodCIDR, "0/24")

// isMasquerade tells whether an `iptables -t nat -S` line is a POSTROUTING rule of the pod
// network.
func isMasquerade(line string) bool {
	return strings.HasPrefix(line, "-A POSTROUTING ") && strings.Contains(line, podNet)
}
