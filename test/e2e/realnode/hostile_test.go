package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/test/e2e"
)

// probeScript runs inside a gateway pod (console exec): for each target of its JSON argument
// it opens a TCP connection ("tcp", host:port) or asks a DNS server for a name ("dns",
// server:port and name), each with a 3-second limit, and prints one JSON line per target:
// {"name", "ok", "detail"}.
const probeScript = `node -e '
const net = require("net"), dns = require("dns");
const once = (t) => new Promise((done) => {
  const end = (ok, detail) => done({name: t.name, ok, detail: String(detail)});
  if (t.kind === "tcp") {
    const [host, port] = [t.addr.slice(0, t.addr.lastIndexOf(":")), +t.addr.slice(t.addr.lastIndexOf(":") + 1)];
    const s = net.connect({host, port, timeout: 3000});
    s.on("connect", () => { s.destroy(); end(true, "connected"); });
    s.on("timeout", () => { s.destroy(); end(false, "timeout"); });
    s.on("error", (e) => end(false, e.code));
  } else {
    const r = new dns.Resolver({timeout: 3000, tries: 1});
    r.setServers([t.addr]);
    r.resolve4(t.query, (e, a) => end(!e, e ? e.code : a.join(",")));
  }
});
Promise.all(JSON.parse(process.argv[1]).map(once)).then((rs) => rs.forEach((r) => console.log(JSON.stringify(r))));
' `

// probeTarget is one thing the hostile agent tries to reach.
type probeTarget struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // tcp or dns
	Addr  string `json:"addr"`
	Query string `json:"query,omitempty"`
	want  bool   // reachable by design
}

// checkContainedOnNode is the hostile-agent suite's kube half: from inside agent a's gateway
// pod, with nothing but console exec, code tries what a prompt injection or a malicious skill
// would, and the node's NetworkPolicy enforcement refuses each attempt: another agent's
// gateway (by its pod address and its Service name), the API server (its Service and the
// node's address), the kubelet, a provider's address that no --agent-egress rule names, and a
// DNS server other than the cluster's. The cluster DNS answers (agents resolve names) and the
// pod holds no service-account token. Without enforcement every refused attempt connects.
func (a agentOnNode) checkContainedOnNode(t *testing.T) {
	other := e2e.CreateRunning(t, a.p, map[string]any{"name": "Neighbour"})
	otherID := other["id"].(string)
	t.Cleanup(func() { a.p.Call("DELETE", "/v0/agents/"+otherID, nil) })
	e2e.Eventually(t, "the second agent to run", func() bool {
		r := a.p.Call("GET", "/v0/agents/"+otherID, nil)
		return r.Status == 200 && r.Obj("agent")["status"] == "running"
	})
	neighbour := gatewayPod(t, a.k8s, a.ns, otherID)
	nodeIP, apiPort := realNodeAddresses(t, a.p)

	// A "provider" on the node's address (an address outside the cluster that no egress rule
	// opens) and a DNS server on the pod network's gateway address, port 53 (a resolver that
	// is not the cluster's).
	provider := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "provider") })}
	pl, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = provider.Serve(pl) }()
	t.Cleanup(func() { _ = provider.Close() })
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

	targets := []probeTarget{
		{Name: "the cluster DNS", Kind: "dns", Addr: net.JoinHostPort(nodeIP, "53"), Query: "kubernetes.default.svc." + localcluster.ClusterDomain, want: true},
		{Name: "another agent's gateway", Kind: "tcp", Addr: net.JoinHostPort(neighbour.Status.PodIP, fmt.Sprint(kube.GatewayPort))},
		{Name: "another agent's gateway by its DNS name", Kind: "tcp", Addr: fmt.Sprintf("%s.%s.%s.svc.%s:%d", neighbour.Spec.Hostname, neighbour.Spec.Subdomain, a.ns, localcluster.ClusterDomain, kube.GatewayPort)},
		{Name: "the API server's Service", Kind: "tcp", Addr: net.JoinHostPort(localcluster.KubernetesServiceIP, "443")},
		{Name: "the API server on the node", Kind: "tcp", Addr: net.JoinHostPort(nodeIP, apiPort)},
		{Name: "the kubelet", Kind: "tcp", Addr: net.JoinHostPort(nodeIP, "10250")},
		{Name: "a provider without an egress rule", Kind: "tcp", Addr: pl.Addr().String()},
		{Name: "a DNS server that is not the cluster's", Kind: "dns", Addr: net.JoinHostPort(bridgeIP, "53"), Query: "exfiltrate.example.com"},
	}
	// Control: the node itself reaches the other gateway and both servers (they are up; only
	// the pod is refused).
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(neighbour.Status.PodIP, fmt.Sprint(kube.GatewayPort)), 3*time.Second); err != nil {
		t.Fatalf("the other gateway does not listen: %v", err)
	} else {
		c.Close()
	}
	if resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + pl.Addr().String()); err != nil {
		t.Fatalf("the provider stand-in is down: %v", err)
	} else {
		resp.Body.Close()
	}
	if _, _, err := new(dns.Client).Exchange(new(dns.Msg).SetQuestion("x.example.com.", dns.TypeA), net.JoinHostPort(bridgeIP, "53")); err != nil {
		t.Fatalf("the rogue DNS server is down: %v", err)
	}

	arg, _ := json.Marshal(targets)
	r := e2e.Must(t, a.p.Call("POST", a.base+"/console/exec", map[string]string{"command": probeScript + shellQuote(string(arg))}), 200, "probe from inside the agent")
	got := map[string]struct {
		OK     bool
		Detail string
	}{}
	for _, line := range strings.Split(strings.TrimSpace(r.Str("stdout")), "\n") {
		var res struct {
			Name   string
			OK     bool
			Detail string
		}
		if json.Unmarshal([]byte(line), &res) == nil {
			got[res.Name] = struct {
				OK     bool
				Detail string
			}{res.OK, res.Detail}
		}
	}
	for _, tg := range targets {
		res, ok := got[tg.Name]
		switch {
		case !ok:
			t.Errorf("%s: no result (stdout %q, stderr %q)", tg.Name, r.Str("stdout"), r.Str("stderr"))
		case res.OK != tg.want:
			t.Errorf("%s (%s %s): reached=%v (%s), want reached=%v", tg.Name, tg.Kind, tg.Addr, res.OK, res.Detail, tg.want)
		default:
			t.Logf("%s: reached=%v (%s)", tg.Name, res.OK, res.Detail)
		}
	}
	sa := e2e.Must(t, a.p.Call("POST", a.base+"/console/exec", map[string]string{"command": "ls /var/run/secrets/kubernetes.io/serviceaccount 2>&1; echo done"}), 200, "look for a token")
	if out := sa.Str("stdout"); strings.Contains(out, "token") {
		t.Errorf("the gateway pod holds a service-account token: %q", out)
	}
	e2e.Must(t, a.p.Call("DELETE", "/v0/agents/"+otherID, nil), 200, "delete the second agent")
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

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
