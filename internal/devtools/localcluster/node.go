package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/runtime/syscallpolicy"
)

// Network of the node: pods get addresses from PodCIDR on the bridge Bridge; Services get
// them from ServiceCIDR.
const (
	PodCIDR     = "10.244.0.0/24"
	ServiceCIDR = "10.96.0.0/16"
	Bridge      = "apl0"
	cniBinDir   = "/usr/lib/cni"
	// cgroupRoot is the cgroup the kubelet puts every pod under, in every hierarchy.
	cgroupRoot = "/agentplane"
)

// cniConfig is the pod network: a bridge with host-local addresses (kept in the cluster's
// directory) and masquerading out of the node.
func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "agentplane",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, Bridge, ipamDir, PodCIDR)
}

// AgentSeccompProfile is where the node holds the gateways' seccomp profile (the list's:
// syscallpolicy.Profile), under the kubelet's seccomp directory: the Localhost profile that
// `agentplane dev --runtime kube` gives its gateway pods (--agent-seccomp-profile).
const AgentSeccompProfile = "agentplane/agent.json"

// installSeccompProfile writes the gateways' profile under the kubelet's root dir, as a
// platform team installs config/seccomp/agentplane-agent.json on its nodes.
func installSeccompProfile(root string) error {
	body, err := syscallpolicy.Profile()
	if err != nil {
		return err
	}
	p := filepath.Join(root, "seccomp", AgentSeccompProfile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, body, 0o644)
}

// PodPidsLimit bounds each pod's processes and threads on the real node, as the local
// runtime bounds an agent's (local.DefaultPidsLimit).
const PodPidsLimit = 1024

// kubeletConfig is the node's KubeletConfiguration. Settings this machine needs:
//   - failCgroupV1 false and cgroupDriver cgroupfs: cgroup v1, no systemd;
//   - address: the machine's own address (the kubelet refuses loopback);
//   - image garbage collection off: images are imported, never pulled, so one collected
//     could not come back;
//   - eviction only near real exhaustion: a busy test machine is not a reason to evict;
//   - pod logs in the cluster's directory, not /var/log/pods (they go with it);
//   - podPidsLimit: a pod's processes and threads are bounded (PodPidsLimit), so a fork bomb
//     in an agent stops inside its pod (Kubernetes has no per-pod field for it: a platform
//     team sets it on its nodes, docs/SECURITY.md).
//
// The kubelet's API answers anyone who reaches the node address (anonymous, AlwaysAllow):
// the cluster is a single-machine test rig; the API server reaches it for exec and logs.
func kubeletConfig(c *Cluster, port, healthz int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://%s
clusterDomain: %s
clusterDNS: [%s]
resolvConf: /etc/resolv.conf
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
serializeImagePulls: false
maxPods: 110
podPidsLimit: %d
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
`, c.NodeIP, port, healthz, cgroupRoot, c.sock, ClusterDomain, c.NodeIP, filepath.Join(c.Dir, "pod-logs"), PodPidsLimit)
}

// startKubelet registers the node and waits until it is Ready.
func (c *Cluster) startKubelet(ctx context.Context) error {
	port, err := freePort(c.NodeIP)
	if err != nil {
		return err
	}
	healthz, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	cfg := filepath.Join(c.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(kubeletConfig(c, port, healthz)), 0o600); err != nil {
		return err
	}
	if err := installSeccompProfile(filepath.Join(c.Dir, "kubelet")); err != nil {
		return err
	}
	p, err := start("kubelet", c.bin("kubelet"), []string{
		"--config", cfg,
		"--kubeconfig", c.Kubeconfig,
		"--root-dir", filepath.Join(c.Dir, "kubelet"),
		"--cert-dir", filepath.Join(c.Dir, "kubelet-pki"),
		"--hostname-override", c.NodeName,
		"--node-ip", c.NodeIP,
		"--v", "1",
	}, c.LogDir, c.Dir)
	if err != nil {
		return err
	}
	c.kubelet = p
	return waitFor(ctx, "the node to be Ready", 2*time.Minute, p, func() error { return c.nodeReady(ctx) })
}

// nodeReady is nil once the node reports Ready.
func (c *Cluster) nodeReady(ctx context.Context) error {
	var n corev1.Node
	if err := c.Client.Get(ctx, client.ObjectKey{Name: c.NodeName}, &n); err != nil {
		return err
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s: %s: %s", c.NodeName, cond.Reason, cond.Message)
		}
	}
	return errors.New("node " + c.NodeName + " has no Ready condition yet")
}

// startControllers runs kube-controller-manager and kube-scheduler against the API server.
func (c *Cluster) startControllers() error {
	kcmPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	kcm, err := start("kube-controller-manager", c.bin("kube-controller-manager"), []string{
		"--kubeconfig", c.Kubeconfig,
		"--authentication-kubeconfig", c.Kubeconfig,
		"--authorization-kubeconfig", c.Kubeconfig,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(kcmPort),
		"--leader-elect=false",
		"--controllers", "*",
		"--service-account-private-key-file", filepath.Join(c.certDir, "sa-signer.key"),
		"--root-ca-file", c.caFile,
		"--use-service-account-credentials=false",
		"--service-cluster-ip-range", ServiceCIDR,
		// A stopped kubelet makes its node NotReady after 20 s (40 s by default).
		"--node-monitor-grace-period", "20s",
		"--node-monitor-period", "2s",
		// Client-side limits of a shared control plane (20 QPS) would make a scale run on
		// simulated nodes measure the limit; the API server on this machine takes more.
		"--kube-api-qps", "200", "--kube-api-burst", "400",
		"--v", "1",
	}, c.LogDir, c.Dir)
	if err != nil {
		return err
	}
	c.kcm = kcm
	schedPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	sched, err := start("kube-scheduler", c.bin("kube-scheduler"), []string{
		"--kubeconfig", c.Kubeconfig,
		"--authentication-kubeconfig", c.Kubeconfig,
		"--authorization-kubeconfig", c.Kubeconfig,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(schedPort),
		"--leader-elect=false",
		"--kube-api-qps", "200", "--kube-api-burst", "400",
		"--v", "1",
	}, c.LogDir, c.Dir)
	if err != nil {
		return err
	}
	c.scheduler = sched
	return nil
}

// makeCgroupRoot creates the kubelet's cgroupRoot in every cgroup v1 hierarchy (the kubelet
// wants it to exist), with cpuset's CPUs and memory nodes copied from the parent.
func makeCgroupRoot() error {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue // not a mounted hierarchy
		}
		d := filepath.Join(h, cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }
