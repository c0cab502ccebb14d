package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/platform"
)

// addIsolationFlags declares the flags that isolate agents and route their domains through
// the Gateway API (kube runtime; `manager` and `dev` share them).
func addIsolationFlags(f *pflag.FlagSet, o *platform.Options) {
	f.StringVar(&o.Runtime.RuntimeClassName, "agent-runtime-class", "", "RuntimeClass of gateway pods whose agent and workspace name none (kube runtime; empty: the cluster's default runtime)")
	f.StringVar(&o.Runtime.SeccompProfile, "agent-seccomp-profile", "", "seccomp profile of every gateway pod, a path under the kubelet's seccomp directory on each node where config/seccomp/agentplane-agent.json is installed (kube runtime; empty: the container runtime's default, which lets io_uring through before containerd 2)")
	f.BoolVar(&o.Runtime.NetworkPolicy, "agent-network-policy", true, "give each agent a default-deny NetworkPolicy (kube runtime): in from the manager's pods and --agent-ingress-namespace, out to the cluster DNS, the model proxy and --agent-egress")
	f.Var(&egressFlag{rules: &o.Runtime.Egress}, "agent-egress", "NAME=CIDR[:PORT] that agents may reach: NAME is a model provider (agents holding its key themselves), a channel type (agents with such a Channel) or * (every agent); on the local runtime, whose agents reach the public internet through the manager's egress proxy, each rule opens its destination (a private range, this host) to every agent; repeat for several")
	f.Var(&cidrsFlag{cidrs: &o.Runtime.DNS}, "agent-dns", "CIDR where the cluster DNS answers outside the pod network (a node-local cache) that agents may query on port 53; repeat for several (default: the kube-dns pods, or the endpoints of a kube-dns Service without a selector)")
	f.StringArrayVar(&o.Runtime.IngressNamespaces, "agent-ingress-namespace", nil, "namespace of an ingress or Gateway controller allowed to reach the gateways (Domains); repeat for several")
	f.StringVar(&o.Domains.Gateway, "domain-gateway", "", "NAMESPACE/NAME[/SECTION] of the Gateway that routes Domains with HTTPRoutes instead of Ingresses (kube runtime; TLS is the Gateway's)")
}

// egressFlag collects --agent-egress rules.
type egressFlag struct{ rules *[]kube.EgressRule }

func (e *egressFlag) Set(s string) error {
	r, err := kube.ParseEgressRule(s)
	if err != nil {
		return err
	}
	*e.rules = append(*e.rules, r)
	return nil
}

func (e *egressFlag) Type() string { return "NAME=CIDR[:PORT]" }

func (e *egressFlag) String() string {
	if e.rules == nil {
		return ""
	}
	out := make([]string, 0, len(*e.rules))
	for _, r := range *e.rules {
		out = append(out, r.String())
	}
	return strings.Join(out, ",")
}

// cidrsFlag collects CIDRs (a bare address is a single host).
type cidrsFlag struct{ cidrs *[]string }

func (c *cidrsFlag) Set(s string) error {
	cidr, err := kube.HostCIDR(s)
	if err != nil {
		return err
	}
	*c.cidrs = append(*c.cidrs, cidr)
	return nil
}

func (c *cidrsFlag) Type() string { return "CIDR" }

func (c *cidrsFlag) String() string {
	if c.cidrs == nil {
		return ""
	}
	return strings.Join(*c.cidrs, ",")
}
