package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// kubeProxyConfig is the node's KubeProxyConfiguration: iptables mode, and nothing the
// machine's kernel settings would have to change for (conntrack limits and timeouts are left
// as they are, and NodePorts are not served on localhost, which would need route_localnet).
// Traffic to a ClusterIP is masqueraded when it does not come from the pod network, so the
// node itself (the manager in `agentplane dev --runtime kube`, a test) reaches Services.
func kubeProxyConfig(c *Cluster, healthz, metrics int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
clusterCIDR: %s
mode: iptables
detectLocalMode: ClusterCIDR
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  syncPeriod: 30s
  minSyncPeriod: 1s
`, c.Kubeconfig, c.NodeName, c.NodeIP, healthz, metrics, PodCIDR)
}

// startKubeProxy runs kube-proxy and waits until it has programmed the node's Services.
func (c *Cluster) startKubeProxy(ctx context.Context) error {
	healthz, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	metrics, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	cfg := filepath.Join(c.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfg, []byte(kubeProxyConfig(c, healthz, metrics)), 0o600); err != nil {
		return err
	}
	p, err := start("kube-proxy", c.bin("kube-proxy"), []string{"--config", cfg, "--v", "1"}, c.LogDir, c.Dir)
	if err != nil {
		return err
	}
	c.proxy = p
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz)
	hc := &http.Client{Timeout: 2 * time.Second}
	return waitFor(ctx, "kube-proxy to sync its rules", time.Minute, p, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kube-proxy healthz: %s", resp.Status)
		}
		return nil
	})
}

// stopKubeProxy stops kube-proxy and has it remove its rules (the sweep removes what a
// crashed one leaves).
func (c *Cluster) stopKubeProxy(ctx context.Context) error {
	if c.proxy == nil {
		return nil
	}
	c.proxy.stop(10 * time.Second)
	if _, err := run(ctx, c.bin("kube-proxy"), "--cleanup", "--proxy-mode", "iptables"); err != nil {
		return fmt.Errorf("kube-proxy cleanup: %w", err)
	}
	return nil
}
