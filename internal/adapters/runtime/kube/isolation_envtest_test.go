package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

func networkOptions() kube.NetworkOptions {
	return kube.NetworkOptions{
		Enabled: true, SystemNamespace: "agentplane-system", FacadePort: 8080,
		ModelProxyURL: "http://agentplane-api.agentplane-system.svc",
		Egress: []kube.EgressRule{
			{Name: "openai", CIDR: "162.159.140.0/24", Port: 443},
			{Name: "telegram", CIDR: "149.154.160.0/20", Port: 443},
		},
	}
}

func policy(t *testing.T, ctx context.Context, ns string) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a1"}, np); err != nil {
		t.Fatalf("network policy: %v", err)
	}
	return np
}

// egressCIDRs are the ipBlocks a policy lets out to, in order.
func egressCIDRs(np *networkingv1.NetworkPolicy) []string {
	var out []string
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if p.IPBlock != nil {
				out = append(out, p.IPBlock.CIDR)
			}
		}
	}
	return out
}

func TestNetworkPolicyEnsure(t *testing.T) {
	ctx, a := setup(t, "netpol")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := newRuntime(kube.Options{Network: networkOptions(), Clock: clk})
	ensure(t, ctx, r, a, desired())

	np := policy(t, ctx, "netpol")
	if !metav1.IsControlledBy(np, a) {
		t.Errorf("owner references %+v: want the agent as controller (garbage-collected with it)", np.OwnerReferences)
	}
	if got := np.Spec.PolicyTypes; len(got) != 2 {
		t.Errorf("policy types %v: want Ingress and Egress (default deny both ways)", got)
	}
	// DNS and the model proxy's pods; no provider or channel: no ipBlock.
	if len(np.Spec.Egress) != 2 || len(egressCIDRs(np)) != 0 {
		t.Errorf("egress %+v: want DNS and the model proxy only", np.Spec.Egress)
	}
	if len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels[kube.NamespaceNameLabel] != "agentplane-system" {
		t.Errorf("ingress %+v: want the manager's pods only", np.Spec.Ingress)
	}

	// A pass that changes nothing writes nothing.
	rv := np.ResourceVersion
	ensure(t, ctx, r, a, desired())
	if got := policy(t, ctx, "netpol").ResourceVersion; got != rv {
		t.Errorf("an unchanged pass rewrote the policy (%s -> %s)", rv, got)
	}

	// The agent gets a Telegram channel and its own OpenAI key: the policy follows.
	d := desired()
	d.Egress = []string{"openai", "telegram"}
	ensure(t, ctx, r, a, d)
	if got := egressCIDRs(policy(t, ctx, "netpol")); strings.Join(got, ",") != "162.159.140.0/24,149.154.160.0/20" {
		t.Errorf("egress ipBlocks %v after the channel and key", got)
	}
	// ... and loses the channel again.
	d.Egress = []string{"openai"}
	ensure(t, ctx, r, a, d)
	if got := egressCIDRs(policy(t, ctx, "netpol")); strings.Join(got, ",") != "162.159.140.0/24" {
		t.Errorf("egress ipBlocks %v after the channel went", got)
	}

	// A policy deleted by hand is put back by the next pass (once this runtime's own apply is
	// too old to stand in for a lagging cache).
	if err := env.Client.Delete(ctx, policy(t, ctx, "netpol")); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	ensure(t, ctx, r, a, d)
	policy(t, ctx, "netpol")

	// Deleting the agent deletes its policy.
	if err := r.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: "netpol", Name: "a1"}, &networkingv1.NetworkPolicy{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("policy after Delete: %v", err)
	}
}

func TestNetworkPolicyOff(t *testing.T) {
	ctx, a := setup(t, "netpol-off")
	n := networkOptions()
	n.Enabled = false
	r := newRuntime(kube.Options{Network: n})
	ensure(t, ctx, r, a, desired())
	list := &networkingv1.NetworkPolicyList{}
	if err := env.Client.List(ctx, list, client.InNamespace("netpol-off")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("--agent-network-policy=false made %d policies", len(list.Items))
	}
}

// TestRestrictedPodSecurity proves that the gateway pod passes the `restricted` Pod Security
// profile the workspace namespaces enforce: the API server admits a pod from the built
// template there and refuses a privileged variant of it.
func TestRestrictedPodSecurity(t *testing.T) {
	ctx := context.Background()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "psa"}}
	if err := env.Client.Create(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if err := workspacens.EnsureNamespace(ctx, env.Client, ws); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "psa"}, ns); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{workspacens.PodSecurityEnforce, workspacens.PodSecurityWarn, workspacens.PodSecurityAudit} {
		if ns.Labels[l] != "restricted" {
			t.Errorf("namespace label %s=%q, want restricted", l, ns.Labels[l])
		}
	}
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a1", Namespace: "psa", UID: "uid-a1"},
		Spec: agentsv1.AgentSpec{DisplayName: "Agent One"}}
	sts, err := kube.BuildStatefulSet(a, desired(), kube.Options{Scheme: env.Scheme, Engine: kube.NewStubEngine()})
	if err != nil {
		t.Fatal(err)
	}
	pod := podFromTemplate(sts, "a1-0")
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatalf("the gateway pod is refused in a restricted namespace: %v", err)
	}

	privileged := podFromTemplate(sts, "a1-privileged")
	privileged.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
	privileged.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	err = env.Client.Create(ctx, privileged)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("a privileged pod in the workspace namespace: %v, want refused by PodSecurity restricted", err)
	}
}

// podFromTemplate is the pod the StatefulSet controller would make (the home claim stands in
// as an emptyDir).
func podFromTemplate(sts *appsv1.StatefulSet, name string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = name, sts.Namespace
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: kube.VolumeHome,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return pod
}

// DiscoverDNS reads the cluster DNS Service from the API server: a Service with a selector
// (DNS pods) or none gives no addresses; one without a selector gives its endpoints.
func TestDiscoverDNS(t *testing.T) {
	ctx := context.Background()
	const ns = "dns-discovery"
	if err := env.Client.Create(ctx, kubeenv.Namespace(ns)); err != nil {
		t.Fatal(err)
	}
	if got, err := kube.DiscoverDNS(ctx, env.Client, ns); err != nil || got != nil {
		t.Fatalf("no Service: %v, %v; want nothing", got, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: kube.DNSServiceName, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if got, err := kube.DiscoverDNS(ctx, env.Client, ns); err != nil || got != nil {
		t.Fatalf("a Service of DNS pods: %v, %v; want nothing (the pods are the peers)", got, err)
	}
	svc.Spec.Selector = nil
	if err := env.Client.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	port := int32(53)
	for i, addrs := range [][]string{{"192.0.2.7"}, {"192.0.2.8", "192.0.2.7"}} {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("kube-dns-%d", i), Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: kube.DNSServiceName}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: addrs}},
			Ports:       []discoveryv1.EndpointPort{{Port: &port}},
		}
		if err := env.Client.Create(ctx, slice); err != nil {
			t.Fatal(err)
		}
	}
	got, err := kube.DiscoverDNS(ctx, env.Client, ns)
	if err != nil || strings.Join(got, ",") != "192.0.2.7/32,192.0.2.8/32" {
		t.Fatalf("a Service without a selector: %v, %v; want its endpoints' addresses once each", got, err)
	}
}
