package kube

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

func TestParseEgressRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want EgressRule
		bad  bool
	}{
		{in: "openai=162.159.140.0/24:443", want: EgressRule{Name: "openai", CIDR: "162.159.140.0/24", Port: 443}},
		{in: "telegram=149.154.160.0/20", want: EgressRule{Name: "telegram", CIDR: "149.154.160.0/20"}},
		{in: "*=10.0.0.7:3128", want: EgressRule{Name: "*", CIDR: "10.0.0.7/32", Port: 3128}},
		{in: "slack=10.1.2.3", want: EgressRule{Name: "slack", CIDR: "10.1.2.3/32"}},
		{in: "anthropic=2001:db8::/32:443", want: EgressRule{Name: "anthropic", CIDR: "2001:db8::/32", Port: 443}},
		{in: "x=10.0.0.9/8", want: EgressRule{Name: "x", CIDR: "10.0.0.0/8"}},
		{in: "openai", bad: true},
		{in: "=10.0.0.0/8", bad: true},
		{in: "openai=example.com:443", bad: true},
		{in: "openai=10.0.0.0/8:0", bad: true},
		{in: "openai=10.0.0.0/8:https", bad: true},
	} {
		got, err := ParseEgressRule(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: want an error, got %+v", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if back, err := ParseEgressRule(got.String()); err != nil || back != got {
			t.Errorf("%q: String() %q does not parse back: %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

// policyOptions are the options of a manager in agentplane-system with two egress rules per
// provider or channel and one for every agent.
func policyOptions(proxyURL string) Options {
	o := testOptions()
	o.Network = NetworkOptions{
		Enabled: true, SystemNamespace: "agentplane-system", FacadePort: 8080, ModelProxyURL: proxyURL,
		IngressNamespaces: []string{"ingress-nginx", "envoy-gateway-system", "ingress-nginx"},
		Egress: []EgressRule{
			{Name: "openai", CIDR: "162.159.140.0/24", Port: 443},
			{Name: "telegram", CIDR: "149.154.160.0/20", Port: 443},
			{Name: "*", CIDR: "10.9.9.9/32", Port: 3128},
			{Name: "slack", CIDR: "10.8.0.0/16"},
		},
	}
	return o
}

func TestBuildNetworkPolicy(t *testing.T) {
	const dns = `- ports:
  - port: 53
    protocol: UDP
  - port: 53
    protocol: TCP
  to:
  - namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: kube-system
    podSelector:
      matchLabels:
        k8s-app: kube-dns
`
	const proxyPods = `- ports:
  - port: 8080
    protocol: TCP
  to:
  - namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: agentplane-system
    podSelector:
      matchLabels:
        app.kubernetes.io/component: manager
        app.kubernetes.io/name: agentplane
`
	const all = `- ports:
  - port: 3128
    protocol: TCP
  to:
  - ipBlock:
      cidr: 10.9.9.9/32
`
	for _, tc := range []struct {
		name     string
		proxyURL string
		egress   []string
		want     string
	}{
		{name: "no providers or channels", proxyURL: "http://agentplane-api.agentplane-system.svc", want: dns + proxyPods + all},
		{name: "proxy on the host", proxyURL: "http://192.168.1.20:18080", want: dns + `- ports:
  - port: 18080
    protocol: TCP
  to:
  - ipBlock:
      cidr: 192.168.1.20/32
` + all},
		{name: "no proxy, openai key and slack", egress: []string{"openai", "slack"}, want: dns + `- ports:
  - port: 443
    protocol: TCP
  to:
  - ipBlock:
      cidr: 162.159.140.0/24
` + all + `- to:
  - ipBlock:
      cidr: 10.8.0.0/16
`},
		{name: "telegram", proxyURL: "https://10.0.0.1", egress: []string{"telegram"}, want: dns + `- ports:
  - port: 443
    protocol: TCP
  to:
  - ipBlock:
      cidr: 10.0.0.1/32
- ports:
  - port: 443
    protocol: TCP
  to:
  - ipBlock:
      cidr: 149.154.160.0/20
` + all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDesired()
			d.Egress = tc.egress
			np, err := BuildNetworkPolicy(testAgent(), d, policyOptions(tc.proxyURL))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := yaml.Marshal(np.Spec.Egress)
			if string(got) != tc.want {
				t.Errorf("egress:\n%s\nwant:\n%s", got, tc.want)
			}
			// Ingress is the same for every agent: the manager's pods on the gateway port, the
			// ingress namespaces on every port.
			ingress, _ := yaml.Marshal(np.Spec.Ingress)
			const wantIngress = `- from:
  - namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: agentplane-system
    podSelector:
      matchLabels:
        app.kubernetes.io/component: manager
        app.kubernetes.io/name: agentplane
  ports:
  - port: 18789
    protocol: TCP
- from:
  - namespaceSelector:
      matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values:
        - envoy-gateway-system
        - ingress-nginx
`
			if string(ingress) != wantIngress {
				t.Errorf("ingress:\n%s\nwant:\n%s", ingress, wantIngress)
			}
			if len(np.Spec.PolicyTypes) != 2 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || np.Spec.PolicyTypes[1] != networkingv1.PolicyTypeEgress {
				t.Errorf("policy types %v", np.Spec.PolicyTypes)
			}
			if sel := np.Spec.PodSelector.MatchLabels; len(sel) != 2 || sel["agentplane.io/agent"] != "a1" {
				t.Errorf("pod selector %v", sel)
			}
			if refs := np.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Agent" || refs[0].UID != "uid-a1" || refs[0].Controller == nil || !*refs[0].Controller {
				t.Errorf("owner references %+v", refs)
			}
		})
	}
}

func TestNetworkPolicyNoIngressNamespaces(t *testing.T) {
	o := policyOptions("")
	o.Network.IngressNamespaces = nil
	np, err := BuildNetworkPolicy(testAgent(), runtime.Desired{}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || *np.Spec.Ingress[0].Ports[0].Port != intstr.FromInt32(GatewayPort) {
		t.Errorf("ingress %+v: want the manager's pods on the gateway port alone", np.Spec.Ingress)
	}
	if _, err := BuildNetworkPolicy(testAgent(), runtime.Desired{}, func() Options { o.Network.ModelProxyURL = "::bad"; return o }()); err == nil {
		t.Error("a bad model proxy URL: want an error")
	}
}

// A cluster DNS outside the pod network (DNSAddresses) replaces the DNS pods as the only
// peers agents may query on port 53.
func TestNetworkPolicyDNSAddresses(t *testing.T) {
	o := policyOptions("")
	o.Network.DNSAddresses = []string{"10.0.0.9/32", "169.254.20.10/32", "10.0.0.9/32"}
	np, err := BuildNetworkPolicy(testAgent(), runtime.Desired{}, o)
	if err != nil {
		t.Fatal(err)
	}
	dns := np.Spec.Egress[0]
	var cidrs []string
	for _, p := range dns.To {
		if p.IPBlock == nil || p.PodSelector != nil || p.NamespaceSelector != nil {
			t.Fatalf("DNS peer %+v: want an ipBlock alone", p)
		}
		cidrs = append(cidrs, p.IPBlock.CIDR)
	}
	if strings.Join(cidrs, ",") != "10.0.0.9/32,169.254.20.10/32" || len(dns.Ports) != 2 || dns.Ports[0].Port.IntVal != 53 {
		t.Errorf("DNS egress %+v: want both addresses once, on port 53", dns)
	}
}

func TestRuntimeClassName(t *testing.T) {
	o := testOptions()
	if rc := mustSTS(t, testDesired(), o).Spec.Template.Spec.RuntimeClassName; rc != nil {
		t.Errorf("no class anywhere: got %q", *rc)
	}
	o.RuntimeClassName = "gvisor"
	if rc := mustSTS(t, testDesired(), o).Spec.Template.Spec.RuntimeClassName; rc == nil || *rc != "gvisor" {
		t.Errorf("platform default: got %v", rc)
	}
	d := testDesired()
	d.RuntimeClassName = "kata"
	if rc := mustSTS(t, d, o).Spec.Template.Spec.RuntimeClassName; rc == nil || *rc != "kata" {
		t.Errorf("agent's own: got %v", rc)
	}
}
