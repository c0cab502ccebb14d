package devmode

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/test/e2e"
)

// TestHostileAgentLocal is the attacker of issue 37 on `agentplane dev` (local runtime, the
// real engine): code inside agent A (console exec stands for a prompt injection or a
// malicious skill; it runs where the gateway's tools run) tries to reach the platform and
// another agent B. Every attempt must fail. Without the sandbox and etcd's client
// certificates each one succeeded.
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
	victimToken := e2e.Must(t, p.Call("GET", "/v0/agents/"+victim+"/gateway-token", nil), 200, "victim token").Str("token")
	attacker := e2e.CreateRunning(t, p, map[string]any{"name": "attacker"})["id"].(string)

	// inside runs a shell command in the attacker agent, as its tools would.
	inside := func(script string) (int, string) {
		t.Helper()
		r := e2e.Must(t, p.Call("POST", "/v0/agents/"+attacker+"/console/exec", map[string]any{"command": script}), 200, "exec")
		code, _ := r.Body["exitCode"].(float64)
		return int(code), r.Str("stdout") + r.Str("stderr")
	}
	e2e.Eventually(t, "the victim's gateway to hold its secret", func() bool {
		return victimRunsWith(victimSecret)
	})

	state := p.StateDir
	victimHome := filepath.Join(state, "runtime", "agents", "dev", victim, "home")
	etcd, apiserver := controlPlanePorts(t, state)
	etcdHealth := procFlag("--data-dir="+filepath.Join(state, "etcd"), "--listen-metrics-urls=")
	if etcdHealth == "" {
		t.Fatal("the dev control plane's etcd has no health port")
	}
	attempts := map[string]string{
		"read the platform's kubeconfig":          "cat " + state + "/kubeconfig",
		"read the platform's dev.env":             "cat " + state + "/dev.env",
		"walk up from the home":                   "cat ../../../../../../../kubeconfig ../../../../../../dev.env",
		"read the stored files":                   "ls " + state + "/storage",
		"read the victim's engine config":         "cat " + victimHome + "/.openclaw/openclaw.json",
		"list the victim's home":                  "ls " + victimHome,
		"find the victim's secret in /proc":       "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -F -q '" + bracket(victimSecret) + "'",
		"find the victim's token in /proc":        "cat /proc/*/cmdline /proc/*/environ 2>/dev/null | grep -q '" + bracket(victimToken) + "'",
		"read etcd without a certificate":         "curl -sfk --max-time 5 -X POST -d '{\"key\":\"AA==\",\"range_end\":\"AA==\"}' " + etcd + "/v3/kv/range",
		"read etcd over plain HTTP":               "curl -sf --max-time 5 -X POST -d '{\"key\":\"AA==\",\"range_end\":\"AA==\"}' " + strings.Replace(etcd, "https", "http", 1) + "/v3/kv/range",
		"list Secrets on the API server":          "curl -sfk --max-time 5 " + apiserver + "/api/v1/secrets",
		"call the victim's gateway with no token": "curl -sf --max-time 5 -X POST -H 'Content-Type: application/json' -d '{\"tool\":\"x\",\"args\":{}}' " + gatewayOf(t, p, victim) + "/tools/invoke",
		// A service on the host's loopback that asks for no credential (etcd's health port):
		// the agent's network namespace has no route to it.
		"read etcd's health port": "curl -sf --max-time 5 " + etcdHealth + "/health",
		// Twice the home's size (5 GiB), reserved at once: the home's volume refuses it, so
		// the host's disk (the state dir, etcd's data) keeps its space. The file goes either way.
		"fill the host's disk from the home": "fallocate -l 10G ~/fill; r=$?; rm -f ~/fill; exit $r",
	}
	for what, script := range attempts {
		if code, out := inside(script); code == 0 {
			t.Errorf("%s: it worked from inside an agent: %.300s", what, out)
		}
	}
	// The agent's own token opens the facade for its own agent only.
	own := e2e.Must(t, p.Call("GET", "/v0/agents/"+attacker+"/gateway-token", nil), 200, "attacker token").Str("token")
	if r := p.CallAs(own, "GET", "/v0/agents/"+victim+"/config", nil); r.Status != 404 {
		t.Errorf("the attacker's gateway token on the victim's config: %d %s, want 404", r.Status, r.Raw)
	}
	// A platform token it mints with that token opens no more.
	minted := e2e.Must(t, p.CallAs(own, "POST", "/v0/agents/"+attacker+"/platform/token", nil), 201, "mint a platform token").Str("token")
	for _, path := range []string{"/v0/agents/" + victim + "/config", "/v0/agents/" + victim + "/gateway-token", "/v0/agents/" + victim} {
		if r := p.CallAs(minted, "GET", path, nil); r.Status != 404 {
			t.Errorf("a platform token minted by the attacker on %s: %d %s, want 404", path, r.Status, r.Raw)
		}
	}
	// A process that leaves the command's session is gone when the command ends.
	marker := "1234." + strconv.Itoa(os.Getpid())
	if code, out := inside("setsid sleep " + marker + " </dev/null >/dev/null 2>&1 & sleep 0.3; echo ok"); code != 0 {
		t.Fatalf("setsid: %d %s", code, out)
	}
	e2e.Eventually(t, "the setsid process to be gone", func() bool { return !hostRuns("sleep\x00" + marker) })
	// What an agent may do still works: its own home and /tmp, its own processes only.
	if code, out := inside("touch mine /tmp/mine && ls /proc | grep -c '^[0-9]'"); code != 0 {
		t.Errorf("the agent cannot use its own home: %s", out)
	} else if n, _ := strconv.Atoi(strings.TrimSpace(out)); n > 6 {
		t.Errorf("the agent sees %d processes: more than its own", n)
	}
}

// bracket makes a grep pattern for s that does not match itself in a command line.
func bracket(s string) string { return "[" + s[:1] + "]" + s[1:] }

// victimRunsWith: a process on this host has s in its environment (the victim's gateway,
// once its attached secret is in).
func victimRunsWith(s string) bool { return hostRunsIn("environ", s) }

// hostRuns: a process on this host has s in its command line.
func hostRuns(s string) bool { return hostRunsIn("cmdline", s) }

func hostRunsIn(file, s string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), file)); err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

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
