package localcluster_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/devtools/localcluster"
)

// checkNetworkPolicies proves the node enforces NetworkPolicies (kube-router's firewall):
// a server whose policy admits only pods labelled role=friend answers a friend and not a
// stranger; a pod whose egress policy allows only DNS to the node resolves names but reaches
// neither that server (though it is a friend) nor the API server; the node itself still
// reaches the server's pod (the kubelet's probes and `agentplane dev`'s manager need it).
func checkNetworkPolicies(ctx context.Context, t *testing.T, c *localcluster.Cluster, ref string) {
	t.Helper()
	const ns = "policy"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	web := netcheckPod(ref, ns, "web", corev1.RestartPolicyAlways, "serve", ":8080")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	tcp, udp := ptr.To(corev1.ProtocolTCP), ptr.To(corev1.ProtocolUDP)
	port := func(p *corev1.Protocol, n int32) networkingv1.NetworkPolicyPort {
		v := intstr.FromInt32(n)
		return networkingv1.NetworkPolicyPort{Protocol: p, Port: &v}
	}
	webIngress := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-ingress", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "friend"}}}},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, 8080)},
			}},
		},
	}
	jailEgress := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "jail-egress", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"jailed": "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: c.NodeIP + "/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{port(udp, 53), port(tcp, 53)},
			}},
		},
	}
	for _, o := range []client.Object{nsObj, web, svc, webIngress, jailEgress} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), nsObj) })
	// The node reaches the server's pod whatever the policy says.
	eventually(t, 2*time.Minute, func() error {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
			return err
		}
		if web.Status.PodIP == "" {
			return fmt.Errorf("web has no address yet")
		}
		hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + net.JoinHostPort(web.Status.PodIP, "8080") + "/")
		if err != nil {
			return fmt.Errorf("the node reaches web's pod: %w", err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); string(b) != "netcheck" {
			return fmt.Errorf("web's pod answered %q", b)
		}
		return nil
	})

	url := "http://web." + ns + ".svc." + localcluster.ClusterDomain + "/"
	get := []string{"get", "web", svc.Spec.ClusterIP, url}
	// netcheck's exit codes: 0 fetched, 2 the name did not resolve, 3 resolved but no answer,
	// 4 the API server did not answer.
	cases := []struct {
		name   string
		labels map[string]string
		args   []string
		want   int32
	}{
		{"friend", map[string]string{"role": "friend"}, get, 0},
		{"stranger", nil, get, 3},
		{"jailed-friend", map[string]string{"role": "friend", "jailed": "true"}, get, 3},
		{"jailed-api", map[string]string{"jailed": "true"}, []string{"tls", "https://kubernetes.default.svc/version", "https://" + localcluster.KubernetesServiceIP + "/version", "https://" + net.JoinHostPort(c.NodeIP, apiPort(t, c)) + "/version"}, 4},
	}
	pods := map[string]*corev1.Pod{}
	for _, tc := range cases {
		p := netcheckPod(ref, ns, tc.name, corev1.RestartPolicyNever, tc.args...)
		for k, v := range tc.labels {
			p.Labels[k] = v
		}
		if tc.labels["jailed"] == "true" {
			// The node's firewall learns a new pod's address a moment after the pod starts:
			// a jailed pod's first request must come after that (kube-router has no CNI hook).
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "NETCHECK_SETTLE", Value: "10s"})
		}
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods[tc.name] = p
	}
	for _, tc := range cases {
		p := pods[tc.name]
		eventually(t, 2*time.Minute, func() error {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return fmt.Errorf("pod %s %s", p.Name, p.Status.Phase)
			}
			return nil
		})
		var code int32 = -1
		if s := p.Status.ContainerStatuses; len(s) == 1 && s[0].State.Terminated != nil {
			code = s[0].State.Terminated.ExitCode
		}
		if code != tc.want {
			t.Errorf("pod %s exited %d, want %d (0 fetched, 2 no name, 3 no answer, 4 no API server)", tc.name, code, tc.want)
		}
	}
}

// apiPort is the port the API server serves on at the node's address.
func apiPort(t *testing.T, c *localcluster.Cluster) string {
	t.Helper()
	_, port, err := net.SplitHostPort(c.Config.Host[len("https://"):])
	if err != nil {
		t.Fatalf("API server address %s: %v", c.Config.Host, err)
	}
	return port
}
