package realnode

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/test/e2e"
	"github.com/agentplane/agentplane/test/e2e/breakout"
)

// checkContainedOnNode is the hostile-agent suite (package breakout, the same attempts as on
// the local runtime) on the real node: code inside agent a's gateway pod, with nothing but
// what an agent has, tries to reach another agent, the platform, the node and the kernel, and
// to take more than its bounds; the node refuses each. Here the unreachable addresses are
// another agent's gateway (by its pod address and its Service name), the API server (its
// Service and the node's address), the kubelet, a provider's address that no --agent-egress
// rule names, and a DNS server other than the cluster's; the cluster DNS answers (agents
// resolve names); the pod holds no service-account token. Without the node's NetworkPolicy
// enforcement every refused connection is made.
func (a agentOnNode) checkContainedOnNode(t *testing.T) {
	victimSecret := "victim-attached-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sec := e2e.Must(t, a.p.Call("POST", "/v0/secrets", map[string]string{"name": "VICTIM_SECRET", "value": victimSecret}), 201, "create secret").Obj("secret")
	t.Cleanup(func() { a.p.Call("DELETE", "/v0/secrets/"+sec["id"].(string), nil) })
	other := e2e.CreateRunning(t, a.p, map[string]any{"name": "Neighbour"})
	otherID := other["id"].(string)
	t.Cleanup(func() { a.p.Call("DELETE", "/v0/agents/"+otherID, nil) })
	e2e.Must(t, a.p.Call("POST", "/v0/agents/"+otherID+"/secrets", map[string]any{"secretIds": []string{sec["id"].(string)}}), 200, "attach")
	e2e.Eventually(t, "the second agent's gateway to hold its secret", func() bool {
		return breakout.HostRuns("environ", victimSecret)
	})
	// Control: the node itself reaches the other gateway (only the pod is refused), once the
	// pod that holds the secret listens.
	var neighbour corev1.Pod
	e2e.Eventually(t, "the second agent's gateway to listen", func() bool {
		p, _, _ := readyGatewayPod(a.k8s, a.ns, otherID)
		if p == nil {
			return false
		}
		neighbour = *p
		c, err := net.DialTimeout("tcp", net.JoinHostPort(neighbour.Status.PodIP, fmt.Sprint(kube.GatewayPort)), 3*time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	nodeIP, apiPort := realNodeAddresses(t, a.p)

	// A DNS server on the pod network's gateway address, port 53 (a resolver that is not the
	// cluster's); the suite's own listener on the node's address stands for a provider that
	// no egress rule opens.
	bridgeIP := bridgeAddress(t)
	rogue := &dns.Server{Addr: net.JoinHostPort(bridgeIP, "53"), Net: "udp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.ParseIP("192.0.2.1")})
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	rogue.NotifyStartedFunc = func() { close(started) }
	go func() { _ = rogue.ListenAndServe() }()
	<-started
	t.Cleanup(func() { _ = rogue.Shutdown() })
	// Control: the node itself reaches the rogue server.
	if _, _, err := new(dns.Client).Exchange(new(dns.Msg).SetQuestion("x.example.com.", dns.TypeA), net.JoinHostPort(bridgeIP, "53")); err != nil {
		t.Fatalf("the rogue DNS server is down: %v", err)
	}

	pod := gatewayPod(t, a.k8s, a.ns, a.id)
	var claim corev1.PersistentVolumeClaim
	if err := a.k8s.Get(context.Background(), client.ObjectKey{Namespace: a.ns, Name: homeClaimOf(t, &pod)}, &claim); err != nil {
		t.Fatal(err)
	}
	home := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	const outside = "/tmp/outside"
	breakout.Check(t, breakout.Box{
		P: a.p, Attacker: a.id, Victim: otherID, VictimSecret: victimSecret,
		PlatformFiles: []string{
			"/var/run/secrets/kubernetes.io/serviceaccount/token",
			filepath.Join(a.p.StateDir, devenv.EnvFileName),
			"/proc/1/root/etc/kubernetes",
		},
		Unreachable: []breakout.Target{
			{Name: "another agent's gateway", Kind: "tcp", Addr: net.JoinHostPort(neighbour.Status.PodIP, fmt.Sprint(kube.GatewayPort))},
			{Name: "another agent's gateway by its DNS name", Kind: "tcp", Addr: fmt.Sprintf("%s.%s.%s.svc.%s:%d", neighbour.Spec.Hostname, neighbour.Spec.Subdomain, a.ns, localcluster.ClusterDomain, kube.GatewayPort)},
			{Name: "the API server's Service", Kind: "tcp", Addr: net.JoinHostPort(localcluster.KubernetesServiceIP, "443")},
			{Name: "the API server on the node", Kind: "tcp", Addr: net.JoinHostPort(nodeIP, apiPort)},
			{Name: "the kubelet", Kind: "tcp", Addr: net.JoinHostPort(nodeIP, "10250")},
			{Name: "a DNS server that is not the cluster's", Kind: "dns", Addr: net.JoinHostPort(bridgeIP, "53"), Query: "exfiltrate.example.com"},
		},
		Reachable: []breakout.Target{
			{Name: "the cluster DNS", Kind: "dns", Addr: net.JoinHostPort(nodeIP, "53"), Query: "kubernetes.default.svc." + localcluster.ClusterDomain},
		},
		HostAddr:    nodeIP,
		Sleep:       "/bin/sleep",
		MemoryLimit: pod.Spec.Containers[0].Resources.Limits.Memory().Value(),
		PidsLimit:   localcluster.PodPidsLimit,
		HomeSize:    home.Value(),
		TmpSize:     runtime.TmpSize,
		LinkTarget:  outside,
		Planted: func() []string {
			r := a.p.Call("POST", a.base+"/console/exec", map[string]string{"command": "ls -A " + outside + " 2>/dev/null; true"})
			return strings.Fields(r.Str("stdout"))
		},
	})
	e2e.Must(t, a.p.Call("DELETE", "/v0/agents/"+otherID, nil), 200, "delete the second agent")
}

// homeClaimOf is the name of the claim that holds the pod's home.
func homeClaimOf(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	t.Fatalf("pod %s has no claim: %+v", pod.Name, pod.Spec.Volumes)
	return ""
}

// realNodeAddresses are the node's address and the API server's port there.
func realNodeAddresses(t *testing.T, p *e2e.Platform) (nodeIP, apiPort string) {
	t.Helper()
	kc := devenv.ReadEnvFile(filepath.Join(p.StateDir, devenv.EnvFileName))["KUBECONFIG"]
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

// bridgeAddress is the node's address on the pod network's bridge (the pods' gateway).
func bridgeAddress(t *testing.T) string {
	t.Helper()
	ifc, err := net.InterfaceByName(localcluster.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatalf("no IPv4 address on %s", localcluster.Bridge)
	return ""
}
