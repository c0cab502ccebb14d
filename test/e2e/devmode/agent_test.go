package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/modelproxy/providertest"
)

// gatewayStatus POSTs a made-up tool to the gateway: 401 means the token is refused, 404 that
// it is accepted (the tool does not exist), without side effects.
func gatewayStatus(t *testing.T, endpoint, token string) int {
	t.Helper()
	// A gateway that has just (re)started answers /healthz before its operator context is up;
	// until then tool calls get 503 "Gateway context is unavailable; retry shortly." (the
	// engine's own transient, seen right after a snapshot reset). Retry that one answer.
	deadline := time.Now().Add(30 * time.Second)
	for {
		status := gatewayStatusOnce(t, endpoint, token)
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return status
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func gatewayStatusOnce(t *testing.T, endpoint, token string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", endpoint+"/tools/invoke", strings.NewReader(`{"tool":"agentplane_probe","args":{}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("gateway %s: %v", endpoint, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// eventually polls f until it is true or the timeout ends.
func eventually(t testing.TB, timeout time.Duration, what string, f func() bool) {
	t.Helper()
	if !within(timeout, f) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// within polls f every 250 ms until it holds (true) or timeout passes (false).
func within(timeout time.Duration, f func() bool) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return false
}

// TestRealEngineAgentLifecycle drives one agent on the real OpenClaw gateway through what a
// user does with it.
func TestRealEngineAgentLifecycle(t *testing.T) {
	llm := providertest.New()
	t.Cleanup(llm.Close)
	p := startDev(t, engineDir(t), "--model-proxy-upstream", "anthropic="+llm.URL, "--usage-flush-interval", "1s")

	// Create: waits for provisioning and answers the running agent.
	start := time.Now()
	created := must(t, p.call("POST", "/v0/agents", map[string]any{"name": "E2E Agent", "vibe": "thorough"}), 201, "create agent").obj("agent")
	t.Logf("agent running after %s", time.Since(start).Round(time.Millisecond))
	id, endpoint := created["id"].(string), created["endpoint"].(string)
	if created["status"] != "running" || !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("created agent: %v", created)
	}
	resp, err := http.Get(endpoint + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("gateway /healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	base := "/v0/agents/" + id

	t.Run("devices", func(t *testing.T) {
		r := must(t, p.call("GET", base+"/devices", nil), 200, "devices")
		if _, ok := r.body["paired"]; !ok {
			t.Fatalf("devices: %s", r.raw)
		}
	})

	t.Run("console exec", func(t *testing.T) {
		r := must(t, p.call("POST", base+"/console/exec", map[string]string{"command": "echo hello; ls; exit 4"}), 200, "exec")
		if r.body["exitCode"] != 4.0 || !strings.Contains(r.str("stdout"), "hello") {
			t.Fatalf("exec: %s", r.raw)
		}
		for _, cwd := range []string{"..", "/etc", "../../.."} {
			r := p.call("POST", base+"/console/exec", map[string]string{"command": "pwd", "cwd": cwd})
			if r.status != 400 || r.str("error") != "Invalid command" {
				t.Fatalf("cwd %q: %s", cwd, r.raw)
			}
		}
	})

	t.Run("config validate, write and read back", func(t *testing.T) {
		checkConfig(t, p, base)
		if s := gatewayStatus(t, endpoint, p.call("GET", base+"/gateway-token", nil).str("token")); s != 404 {
			t.Fatalf("gateway refuses its token after a config write: %d", s)
		}
	})

	t.Run("cron add and list", func(t *testing.T) { checkTasks(t, p, base) })

	t.Run("files upload", func(t *testing.T) { checkUpload(t, p, base) })

	t.Run("channels", func(t *testing.T) { checkChannels(t, p, base) })

	t.Run("snapshots", func(t *testing.T) { checkSnapshots(t, p, base) })

	t.Run("gateway token rotation", func(t *testing.T) {
		old := must(t, p.call("GET", base+"/gateway-token", nil), 200, "read token").str("token")
		if s := gatewayStatus(t, endpoint, old); s != 404 {
			t.Fatalf("the gateway refuses its current token: HTTP %d", s)
		}
		if r := p.callAs(old, "GET", base, nil); r.status != 200 {
			t.Fatalf("the gateway token does not open its agent's routes: %s", r.raw)
		}
		if r := p.callAs(old, "GET", "/v0/agents", nil); r.status != 403 {
			t.Fatalf("a gateway token on a workspace route: %d, want 403", r.status)
		}
		fresh := must(t, p.call("POST", base+"/gateway-token/rotate", nil), 200, "rotate").str("token")
		if r := p.callAs(old, "GET", base, nil); r.status != 401 {
			t.Fatalf("the rotated-out token still works on the facade: %d", r.status)
		}
		eventually(t, 30*time.Second, "the gateway to take the new token", func() bool {
			return gatewayStatus(t, endpoint, fresh) == 404 && gatewayStatus(t, endpoint, old) == 401
		})
	})

	t.Run("provider keys stay in the model proxy", func(t *testing.T) { checkModelProxy(t, p, llm, id, endpoint) })

	t.Run("restart and unknown version", func(t *testing.T) {
		bad := p.call("POST", base+"/restart", map[string]string{"version": "1999.1.1"})
		if bad.status != 400 || bad.str("error") != "Invalid version" {
			t.Fatalf("unknown version: %s", bad.raw)
		}
		before := pidOf(t, p, id)
		r := must(t, p.call("POST", base+"/restart", nil), 200, "restart")
		if r.obj("agent")["status"] != "running" {
			t.Fatalf("after restart: %s", r.raw)
		}
		if after := pidOf(t, p, id); after == before || !alive(after) {
			t.Fatalf("restart kept pid %d (now %d)", before, after)
		}
	})

	t.Run("delete stops the gateway", func(t *testing.T) {
		pid := pidOf(t, p, id)
		must(t, p.call("DELETE", base, nil), 200, "delete")
		eventually(t, time.Minute, "the agent to disappear", func() bool { return p.call("GET", base, nil).status == 404 })
		eventually(t, 30*time.Second, "the gateway process to exit", func() bool { return !alive(pid) })
	})

	// A second agent stays up until Ctrl-C, which must leave no process behind.
	second := must(t, p.call("POST", "/v0/agents", map[string]any{"name": "Left running"}), 201, "second agent").obj("agent")
	pid := pidOf(t, p, second["id"].(string))
	p.stop()
	if alive(pid) {
		t.Fatalf("gateway %d survived Ctrl-C", pid)
	}
}

// pidOf reads the local runtime's pid file of an agent.
func pidOf(t *testing.T, p *platform, id string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(p.stateDir, "runtime", "agents", "dev", id, "gateway.pid"))
	if err != nil {
		t.Fatalf("pid of %s: %v", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("pid file of %s: %q", id, raw)
	}
	return pid
}
