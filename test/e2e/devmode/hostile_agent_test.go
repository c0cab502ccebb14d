package devmode

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/test/e2e"
	"github.com/agentplane/agentplane/test/e2e/breakout"
)

// TestHostileAgentLocal is the hostile-agent suite (package breakout, the same attempts as on
// the real node) on `agentplane dev` (local runtime, the real engine): code inside agent A
// tries to reach the platform, another agent B, the host and the kernel, and to take more
// than its bounds. Here the platform's files are the state dir (kubeconfig, dev.env, stored
// files) and B's home by their host paths, and the unreachable addresses the control plane's
// and B's gateway on the host's loopback. Then what only this runtime has: the control plane's
// own credentials (reached or not, etcd and the API server refuse a client without one), and
// a process that leaves the command's session ends with it.
func TestHostileAgentLocal(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed inside the agents for this test: apt-get install curl")
	}
	p := e2e.StartDev(t, e2e.EngineDir(t))
	t.Cleanup(p.Stop)
	victimSecret := "victim-attached-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sec := e2e.Must(t, p.Call("POST", "/v0/secrets", map[string]string{"name": "VICTIM_SECRET", "value": victimSecret}), 201, "create secret").Obj("secret")
	victim := e2e.CreateRunning(t, p, map[string]any{"name": "victim"})["id"].(string)
	e2e.Must(t, p.Call("POST", "/v0/agents/"+victim+"/secrets", map[string]any{"secretIds": []string{sec["id"].(string)}}), 200, "attach")
	// Where the platform makes templates (root, CRIU and the reseed addon: make test's
	// machine) a new agent's gateway is a copy of its engine's template once that is made:
	// the attacks run from inside such a copy.
	copies := e2e.GatewayTemplates()
	if copies {
		e2e.Eventually(t, "the engine's template", func() bool {
			m, _ := filepath.Glob(filepath.Join(e2e.SharedTemplateDir(t), "*", "template.json"))
			return len(m) > 0
		})
	}
	attacker := e2e.CreateRunning(t, p, map[string]any{"name": "attacker"})["id"].(string)
	if copies {
		c := meta.FindStatusCondition(e2e.GetAgent(t, p.KubeClient(), attacker).Status.Conditions, agentsv1.AgentGatewayReady)
		if c == nil || !strings.Contains(c.Message, "born from its engine's template") {
			t.Fatalf("the attacker's gateway is not a copy of its engine's template: %+v", c)
		}
	}
	e2e.Eventually(t, "the victim's gateway to hold its secret", func() bool {
		return breakout.HostRuns("environ", victimSecret)
	})
	// Its restart with the secret done before the attempts, whose end checks it still runs.
	e2e.Eventually(t, "the victim to run again with its secret", func() bool {
		r := p.Call("GET", "/v0/agents/"+victim, nil)
		return r.Status == 200 && r.Obj("agent")["status"] == "running"
	})

	state := p.StateDir
	victimHome := filepath.Join(state, "runtime", "agents", "dev", victim, "home")
	etcd, apiserver := controlPlanePorts(t, state)
	etcdHealth := procFlag("--data-dir="+filepath.Join(state, "etcd"), "--listen-metrics-urls=")
	if etcdHealth == "" {
		t.Fatal("the dev control plane's etcd has no health port")
	}
	outside := t.TempDir()
	box := breakout.Box{
		P: p, Attacker: attacker, Victim: victim, VictimSecret: victimSecret,
		PlatformFiles: []string{
			state + "/kubeconfig", state + "/dev.env", state + "/storage", state + "/etcd",
			"../../../../../../../kubeconfig", "../../../../../../dev.env",
			victimHome, victimHome + "/.openclaw/openclaw.json",
		},
		HostAddr:    "127.0.0.1",
		Sleep:       "/bin/sleep",
		MemoryLimit: local.DefaultMemoryLimit, PidsLimit: local.DefaultPidsLimit,
		HomeSize: local.DefaultHomeSize, TmpSize: runtime.TmpSize,
		LinkTarget: outside,
		Planted:    func() []string { return dirNames(outside) },
	}
	// A network of its own (as root, and as an ordinary user through the network helper).
	for name, u := range map[string]string{"etcd": etcd, "kube-apiserver": apiserver, "etcd's health port": etcdHealth, "the victim's gateway": gatewayOf(t, p, victim)} {
		box.Unreachable = append(box.Unreachable, breakout.Target{Name: "connect to " + name, Kind: "tcp", Addr: hostPort(t, u)})
	}
	breakout.Check(t, box)

	inside := func(script string) (int, string) {
		t.Helper()
		r := e2e.Must(t, p.Call("POST", "/v0/agents/"+attacker+"/console/exec", map[string]any{"command": script}), 200, "exec")
		code, _ := r.Body["exitCode"].(float64)
		return int(code), r.Str("stdout") + r.Str("stderr")
	}
	victimToken := e2e.Must(t, p.Call("GET", "/v0/agents/"+victim+"/gateway-token", nil), 200, "victim token").Str("token")
	attempts := map[string]string{
		"read etcd without a certificate":         "curl -sfk --max-time 5 -X POST -d '{\"key\":\"AA==\",\"range_end\":\"AA==\"}' " + etcd + "/v3/kv/range",
		"read etcd over plain HTTP":               "curl -sf --max-time 5 -X POST -d '{\"key\":\"AA==\",\"range_end\":\"AA==\"}' " + strings.Replace(etcd, "https", "http", 1) + "/v3/kv/range",
		"list Secrets on the API server":          "curl -sfk --max-time 5 " + apiserver + "/api/v1/secrets",
		"call the victim's gateway with no token": "curl -sf --max-time 5 -X POST -H 'Content-Type: application/json' -d '{\"tool\":\"x\",\"args\":{}}' " + gatewayOf(t, p, victim) + "/tools/invoke",
		"find the victim's token with grep":       "cat /proc/*/cmdline /proc/*/environ 2>/dev/null | grep -q '" + bracket(victimToken) + "'",
	}
	for what, script := range attempts {
		if code, out := inside(script); code == 0 {
			t.Errorf("%s: it worked from inside an agent: %.300s", what, out)
		}
	}
	// A process that leaves the command's session is gone when the command ends.
	marker := "1234." + strconv.Itoa(os.Getpid())
	if code, out := inside("setsid sleep " + marker + " </dev/null >/dev/null 2>&1 & sleep 0.3; echo ok"); code != 0 {
		t.Fatalf("setsid: %d %s", code, out)
	}
	e2e.Eventually(t, "the setsid process to be gone", func() bool { return !breakout.HostRuns("cmdline", "sleep\x00"+marker) })
}

// hostPort is the host:port of URL u.
func hostPort(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" {
		t.Fatalf("address %q: %v", u, err)
	}
	return parsed.Host
}

// dirNames lists dir's entries.
func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// bracket makes a grep pattern for s that does not match itself in a command line.
func bracket(s string) string { return "[" + s[:1] + "]" + s[1:] }

// controlPlanePorts are the dev control plane's etcd client URL and kube-apiserver URL, read
// from their command lines on this host.
func controlPlanePorts(t *testing.T, state string) (etcd, apiserver string) {
	t.Helper()
	etcd = procFlag("--data-dir="+filepath.Join(state, "etcd"), "--listen-client-urls=")
	if etcd == "" {
		t.Fatal("the dev control plane's etcd is not running")
	}
	port := procFlag("--etcd-servers="+etcd, "--secure-port=")
	if port == "" {
		t.Fatal("the dev control plane's kube-apiserver is not running")
	}
	return etcd, "https://127.0.0.1:" + port
}

// procFlag is the value of flag on the command line of the process that has the argument arg.
func procFlag(arg, flag string) string {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !slices.Contains(args, arg) {
			continue
		}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, flag); ok {
				return v
			}
		}
	}
	return ""
}

// gatewayOf is the agent's gateway endpoint.
func gatewayOf(t *testing.T, p *e2e.Platform, id string) string {
	t.Helper()
	return e2e.Must(t, p.Call("GET", "/v0/agents/"+id, nil), 200, "get agent").Obj("agent")["endpoint"].(string)
}
