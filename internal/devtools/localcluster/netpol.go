package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// The node enforces NetworkPolicies with kube-router's network policy firewall, run alone
// (no BGP router, no service proxy: kube-proxy serves Services, the bridge CNI plugin wires
// pods). It programs iptables chains (KUBE-ROUTER-*, KUBE-POD-FW-*, KUBE-NWPLCY-*) and ipsets
// (KUBE-SRC-*, KUBE-DST-*) from the pods, namespaces and policies it watches: a pod that a
// policy selects takes and sends only what the policy allows, also to and from the node's own
// addresses (the INPUT and OUTPUT chains), except the node's own traffic to its pods, which
// kube-router lets in (the kubelet's probes; here also the manager of `agentplane dev`).

// bridgeNetfilter makes bridged pod-to-pod traffic pass iptables, where the firewall sees it.
const bridgeNetfilter = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// startNetworkPolicies runs kube-router's firewall and waits until it has set up its chains
// and reports healthy.
func (c *Cluster) startNetworkPolicies(ctx context.Context) error {
	if b, err := os.ReadFile(bridgeNetfilter); err != nil {
		return fmt.Errorf("network policies need br_netfilter (%s): %w", bridgeNetfilter, err)
	} else if strings.TrimSpace(string(b)) != "1" {
		if err := os.WriteFile(bridgeNetfilter, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("network policies: %w", err)
		}
	}
	health, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	p, err := start("kube-router", c.bin("kube-router"), []string{
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false",
		"--enable-cni=false", "--enable-pod-egress=false", "--enable-ipv6=false",
		"--kubeconfig", c.Kubeconfig, "--hostname-override", c.NodeName,
		"--service-cluster-ip-range", ServiceCIDR,
		"--health-port", strconv.Itoa(health), "--metrics-port", "0", "--v", "1",
	}, c.LogDir, c.Dir)
	if err != nil {
		return err
	}
	c.netpol = p
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", health)
	hc := &http.Client{Timeout: 2 * time.Second}
	return waitFor(ctx, "kube-router's firewall to set up", time.Minute, p, func() error {
		if _, err := run(ctx, "iptables", "-t", "filter", "-S", "KUBE-ROUTER-FORWARD"); err != nil {
			return fmt.Errorf("no KUBE-ROUTER-FORWARD chain yet: %w", err)
		}
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kube-router healthz: %s", resp.Status)
		}
		return nil
	})
}

// stopNetworkPolicies stops the firewall; the sweep removes its chains and ipsets.
func (c *Cluster) stopNetworkPolicies() {
	c.netpol.stop(10 * time.Second)
}

// ipsetPrefixes name the sets kube-router's firewall makes.
var ipsetPrefixes = []string{"KUBE-SRC-", "KUBE-DST-", "kube-router-"}

// allIPSets are the machine's ipsets of the kinds the firewall makes.
func allIPSets(ctx context.Context) []string {
	out, err := run(ctx, "ipset", "list", "-n")
	if err != nil {
		return nil
	}
	var sets []string
	for _, s := range strings.Fields(out) {
		for _, p := range ipsetPrefixes {
			if strings.HasPrefix(s, p) {
				sets = append(sets, s)
				break
			}
		}
	}
	return sets
}

// newIPSets are the firewall's sets that appeared since the baseline.
func (c *Cluster) newIPSets(ctx context.Context) []string {
	var out []string
	for _, s := range allIPSets(ctx) {
		if !c.baseline.ipsets[s] {
			out = append(out, s)
		}
	}
	return out
}

// removeIPSets destroys the firewall's new sets (after removeChains: a set that a rule uses
// cannot go).
func (c *Cluster) removeIPSets(ctx context.Context) []error {
	var errs []error
	for _, s := range c.newIPSets(ctx) {
		if _, err := run(ctx, "ipset", "destroy", s); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
