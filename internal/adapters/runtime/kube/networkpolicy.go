package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// NamespaceNameLabel is the label the API server puts on every namespace with its name.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// EgressAll is the EgressRule name that applies to every agent.
const EgressAll = "*"

// EgressRule opens egress to CIDR (on Port, every port when 0) for the agents that need
// Name: a model provider they hold a key of, a channel type they have, or EgressAll.
type EgressRule struct {
	Name string
	CIDR string
	Port int32
}

// String is the rule as --agent-egress takes it.
func (e EgressRule) String() string {
	if e.Port > 0 {
		return fmt.Sprintf("%s=%s:%d", e.Name, e.CIDR, e.Port)
	}
	return e.Name + "=" + e.CIDR
}

// NetworkOptions shape the default-deny NetworkPolicy of every gateway pod (Options.Network).
type NetworkOptions struct {
	// Enabled gives each agent its NetworkPolicy.
	Enabled bool
	// SystemNamespace and ManagerLabels find the manager's pods (the REST facade and the
	// model proxy), which reach the gateways and which the gateways reach on FacadePort.
	SystemNamespace string
	ManagerLabels   map[string]string
	FacadePort      int32
	// ModelProxyURL is the model proxy's base URL as agents reach it ("" = none). When its
	// host is an IP address (a manager on the host, outside the pod network) the egress to it
	// is an ipBlock of that address; otherwise it is the manager's pods on FacadePort.
	ModelProxyURL string
	// IngressNamespaces hold the ingress or Gateway controllers that route Domains to agents.
	IngressNamespaces []string
	// Egress rules, in flag order.
	Egress []EgressRule
	// DNSNamespace and DNSLabels find the cluster DNS pods (kube-system, k8s-app=kube-dns).
	DNSNamespace string
	DNSLabels    map[string]string
	// DNSAddresses, when set, are where the cluster DNS answers outside the pod network (a
	// node-local cache, a resolver on the node; CIDRs): agents reach those on port 53 instead
	// of the DNS pods. DiscoverDNS finds them for a kube-dns Service without a selector.
	DNSAddresses []string
}

// Defaults of NetworkOptions.
var (
	DefaultManagerLabels = map[string]string{"app.kubernetes.io/name": "agentplane", "app.kubernetes.io/component": "manager"}
	DefaultDNSLabels     = map[string]string{"k8s-app": "kube-dns"}
)

const (
	DefaultFacadePort   = 8080
	DefaultDNSNamespace = "kube-system"
)

func (n NetworkOptions) withDefaults() NetworkOptions {
	if len(n.ManagerLabels) == 0 {
		n.ManagerLabels = DefaultManagerLabels
	}
	if n.FacadePort == 0 {
		n.FacadePort = DefaultFacadePort
	}
	if n.DNSNamespace == "" {
		n.DNSNamespace = DefaultDNSNamespace
	}
	if len(n.DNSLabels) == 0 {
		n.DNSLabels = DefaultDNSLabels
	}
	return n
}

// ParseEgressRule parses NAME=CIDR[:PORT] (a bare address is a /32 or /128).
func ParseEgressRule(s string) (EgressRule, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || rest == "" {
		return EgressRule{}, fmt.Errorf("%q: want NAME=CIDR[:PORT]", s)
	}
	r := EgressRule{Name: name}
	addr := rest
	// The port follows the CIDR's prefix length (IPv6 addresses hold colons themselves).
	if slash := strings.LastIndex(rest, "/"); slash >= 0 {
		if i := strings.LastIndex(rest[slash:], ":"); i >= 0 {
			addr = rest[:slash+i]
			p, err := strconv.ParseUint(rest[slash+i+1:], 10, 16)
			if err != nil || p == 0 {
				return EgressRule{}, fmt.Errorf("%q: bad port", s)
			}
			r.Port = int32(p)
		}
	} else if host, port, err := net.SplitHostPort(rest); err == nil {
		addr = host
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return EgressRule{}, fmt.Errorf("%q: bad port", s)
		}
		r.Port = int32(p)
	}
	cidr, err := HostCIDR(addr)
	if err != nil {
		return EgressRule{}, fmt.Errorf("%q: %w", s, err)
	}
	r.CIDR = cidr
	return r, nil
}

// HostCIDR is s as a CIDR in canonical form; a bare address is a single host.
func HostCIDR(s string) (string, error) {
	if !strings.Contains(s, "/") {
		ip := net.ParseIP(s)
		if ip == nil {
			return "", fmt.Errorf("%q is not an IP address or CIDR", s)
		}
		if ip.To4() != nil {
			return ip.String() + "/32", nil
		}
		return ip.String() + "/128", nil
	}
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a CIDR", s)
	}
	return n.String(), nil
}

// NetworkPolicyName is the agent's NetworkPolicy.
func NetworkPolicyName(a *agentsv1.Agent) string { return a.Name }

// BuildNetworkPolicy is the agent's default-deny NetworkPolicy, owned by the agent: its
// gateway pod takes traffic only from the manager's pods (on the gateway port) and from the
// ingress namespaces, and sends it only to the cluster DNS, the model proxy and the egress
// rules whose name the agent needs (d.Egress) or EgressAll. Nothing else: not the API server,
// not another agent, not a DNS server other than the cluster's.
func BuildNetworkPolicy(a *agentsv1.Agent, d runtime.Desired, o Options) (*networkingv1.NetworkPolicy, error) {
	o = o.withDefaults()
	np, err := buildNetworkPolicy(a, d, o)
	if err != nil {
		return nil, err
	}
	return np, own(a, np, o)
}

// buildNetworkPolicy is BuildNetworkPolicy without the owner (a pool member's is the pool).
func buildNetworkPolicy(a *agentsv1.Agent, d runtime.Desired, o Options) (*networkingv1.NetworkPolicy, error) {
	if o.Engine == nil {
		return nil, errors.New("kube runtime: no engine")
	}
	n := o.Network.withDefaults()
	tcp, udp := ptr.To(corev1.ProtocolTCP), ptr.To(corev1.ProtocolUDP)
	port := func(proto *corev1.Protocol, p int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: proto, Port: ptrPort(p)}
	}
	manager := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: n.SystemNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(n.ManagerLabels)},
	}
	ingress := []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{manager}, Ports: []networkingv1.NetworkPolicyPort{port(tcp, GatewayPort)},
	}}
	if len(n.IngressNamespaces) > 0 {
		// Every port: a Domain may route to any port the agent serves.
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: sortedUnique(n.IngressNamespaces),
			}}},
		}}})
	}
	dns := []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: n.DNSNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(n.DNSLabels)},
	}}
	if len(n.DNSAddresses) > 0 {
		dns = dns[:0]
		for _, a := range sortedUnique(n.DNSAddresses) {
			dns = append(dns, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: a}})
		}
	}
	egress := []networkingv1.NetworkPolicyEgressRule{{
		To: dns, Ports: []networkingv1.NetworkPolicyPort{port(udp, 53), port(tcp, 53)},
	}}
	if rule, err := proxyEgress(n, manager); err != nil {
		return nil, err
	} else if rule != nil {
		egress = append(egress, *rule)
	}
	for _, e := range n.Egress {
		if e.Name != EgressAll && !slices.Contains(d.Egress, e.Name) {
			continue
		}
		rule := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: e.CIDR}}}}
		if e.Port > 0 {
			rule.Ports = []networkingv1.NetworkPolicyPort{port(tcp, e.Port)}
		}
		egress = append(egress, rule)
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(a, NetworkPolicyName(a), o),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selectorLabels(a)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     ingress,
			Egress:      egress,
		},
	}
	return np, nil
}

// proxyEgress is the egress to the model proxy (nil: no proxy): an ipBlock when its URL names
// an IP address, else the manager's pods on the facade port.
func proxyEgress(n NetworkOptions, manager networkingv1.NetworkPolicyPeer) (*networkingv1.NetworkPolicyEgressRule, error) {
	if n.ModelProxyURL == "" {
		return nil, nil
	}
	u, err := url.Parse(n.ModelProxyURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("model proxy URL %q: not a URL", n.ModelProxyURL)
	}
	tcp := ptr.To(corev1.ProtocolTCP)
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		cidr, _ := HostCIDR(ip.String())
		p := 80
		if u.Scheme == "https" {
			p = 443
		}
		if s := u.Port(); s != "" {
			p, _ = strconv.Atoi(s)
		}
		return &networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: tcp, Port: ptrPort(int32(p))}},
		}, nil
	}
	return &networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{manager},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: tcp, Port: ptrPort(n.FacadePort)}},
	}, nil
}

// ensureNetworkPolicy applies the agent's NetworkPolicy, marked with its fingerprint, when
// the cache (metadata only) does not show that fingerprint and this runtime has not applied
// it moments ago: a pass that changes nothing costs no request.
func (r *Runtime) ensureNetworkPolicy(ctx context.Context, agent *agentsv1.Agent, d runtime.Desired) error {
	if !r.opts.Network.Enabled {
		return nil
	}
	np, err := BuildNetworkPolicy(agent, d, r.opts)
	if err != nil {
		return err
	}
	fp, err := fingerprint(np)
	if err != nil {
		return err
	}
	np.Annotations = map[string]string{agentsv1.AnnotationApplied: fp}
	key := policyKey(client.ObjectKeyFromObject(np))
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"))
	if err := r.opts.Client.Get(ctx, client.ObjectKey(key), live); err == nil &&
		live.GetAnnotations()[agentsv1.AnnotationApplied] == fp && live.GetDeletionTimestamp() == nil {
		r.recent.Delete(key)
		return nil
	}
	if v, ok := r.recent.Load(key); ok {
		if m := v.(recentApply); m.fp == fp && r.opts.Clock.Now().Sub(m.at) <= recentApplyWindow {
			return nil
		}
	}
	if _, err := r.apply(ctx, np); err != nil {
		return fmt.Errorf("apply network policy: %w", err)
	}
	r.recent.Store(key, recentApply{fp: fp, at: r.opts.Clock.Now()})
	return nil
}

// policyKey keys a NetworkPolicy's entry in Runtime.recent (apart from the StatefulSet of
// the same name).
type policyKey client.ObjectKey

func ptrPort(p int32) *intstr.IntOrString { v := intstr.FromInt32(p); return &v }

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
