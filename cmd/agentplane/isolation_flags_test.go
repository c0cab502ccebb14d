package main

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/platform"
)

func TestIsolationFlags(t *testing.T) {
	parse := func(args ...string) (platform.Options, error) {
		var o platform.Options
		cmd := &cobra.Command{Use: "x"}
		addPlatformFlags(cmd, &o, ":8080")
		return o, cmd.Flags().Parse(args)
	}
	o, err := parse()
	if err != nil || !o.Runtime.NetworkPolicy || o.Runtime.RuntimeClassName != "" || o.Domains.Gateway != "" {
		t.Fatalf("defaults: %+v, %v (want the NetworkPolicy on, nothing else)", o.Runtime, err)
	}
	o, err = parse("--agent-runtime-class", "gvisor", "--agent-network-policy=false",
		"--agent-egress", "openai=162.159.140.0/24:443", "--agent-egress", "*=10.0.0.7:3128",
		"--agent-ingress-namespace", "ingress-nginx", "--agent-ingress-namespace", "envoy-gateway-system",
		"--domain-gateway", "infra/public/https")
	if err != nil {
		t.Fatal(err)
	}
	want := []kube.EgressRule{{Name: "openai", CIDR: "162.159.140.0/24", Port: 443}, {Name: "*", CIDR: "10.0.0.7/32", Port: 3128}}
	if r := o.Runtime; r.RuntimeClassName != "gvisor" || r.NetworkPolicy || len(r.Egress) != 2 || r.Egress[0] != want[0] || r.Egress[1] != want[1] ||
		len(r.IngressNamespaces) != 2 || o.Domains.Gateway != "infra/public/https" {
		t.Errorf("parsed %+v, gateway %q", r, o.Domains.Gateway)
	}
	if _, err := parse("--agent-egress", "openai=api.openai.com"); err == nil {
		t.Error("an egress rule naming a host name: want an error (NetworkPolicy takes addresses)")
	}
}
