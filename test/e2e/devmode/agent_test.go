// Package devmode holds the end-to-end tests of `agentplane dev` on its default, local
// runtime with the real OpenClaw engine (harness: package e2e).
package devmode

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/fakediscord"
	"github.com/agentplane/agentplane/internal/devtools/fakeslack"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
	"github.com/agentplane/agentplane/test/e2e"
)

// TestRealEngineAgentLifecycle drives one agent on the real OpenClaw gateway through what a
// user does with it.
func TestRealEngineAgentLifecycle(t *testing.T) {
	llm := providertest.New()
	t.Cleanup(llm.Close)
	tg := faketelegram.New("123456789:AAe2e-bot-token-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	t.Cleanup(tg.Close)
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	slackBot, slackApp := "xoxb-e2e-bot-"+stamp, "xapp-e2e-app-"+stamp
	sl := fakeslack.New(fakeslack.Options{BotToken: slackBot, AppToken: slackApp})
	t.Cleanup(sl.Close)
	dc := fakediscord.New(fakediscord.Options{BotToken: base64.RawURLEncoding.EncodeToString([]byte("100000000000000001")) + "." + stamp + ".e2e-discord-bot"})
	t.Cleanup(dc.Close)
	p := e2e.StartDev(t, e2e.EngineDir(t), "--model-proxy-upstream", "anthropic="+llm.URL, "--usage-flush-interval", "1s",
		"--telegram-api-url", tg.URL, "--slack-api-url", sl.APIURL(), "--discord-api-url", dc.APIURL(), "--discord-cdn-url", dc.CDNURL()) // Slack and Discord relayed by default

	// Create: waits for provisioning and answers the running agent.
	start := time.Now()
	created := e2e.CreateRunning(t, p, map[string]any{"name": "E2E Agent", "vibe": "thorough"})
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

	t.Run("the engine's compile cache is warmed once and sealed", func(t *testing.T) {
		// The runtime warms it in a sandbox of its own beside the first gateway start; every
		// platform of this package shares it (e2e.SharedCompileCacheDir).
		e2e.Eventually(t, "a sealed compile cache", func() bool {
			m, _ := filepath.Glob(filepath.Join(e2e.SharedCompileCacheDir(t), "*", ".agentplane-compile-cache.json"))
			return len(m) > 0
		})
	})

	t.Run("devices", func(t *testing.T) {
		r := e2e.Must(t, p.Call("GET", base+"/devices", nil), 200, "devices")
		if _, ok := r.Body["paired"]; !ok {
			t.Fatalf("devices: %s", r.Raw)
		}
	})

	t.Run("console exec", func(t *testing.T) {
		r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "echo hello; ls; exit 4"}), 200, "exec")
		if r.Body["exitCode"] != 4.0 || !strings.Contains(r.Str("stdout"), "hello") {
			t.Fatalf("exec: %s", r.Raw)
		}
		for _, cwd := range []string{"..", "/etc", "../../.."} {
			r := p.Call("POST", base+"/console/exec", map[string]string{"command": "pwd", "cwd": cwd})
			if r.Status != 400 || r.Str("error") != "Invalid command" {
				t.Fatalf("cwd %q: %s", cwd, r.Raw)
			}
		}
	})

	t.Run("config validate, write and read back", func(t *testing.T) {
		e2e.CheckConfig(t, p, base)
		if s := e2e.GatewayStatus(t, endpoint, p.Call("GET", base+"/gateway-token", nil).Str("token")); s != 404 {
			t.Fatalf("gateway refuses its token after a config write: %d", s)
		}
	})

	t.Run("cron add and list", func(t *testing.T) { e2e.CheckTasks(t, p, base) })

	t.Run("files upload", func(t *testing.T) { e2e.CheckUpload(t, p, base) })

	t.Run("snapshots", func(t *testing.T) { e2e.CheckSnapshots(t, p, base) })

	t.Run("gateway token rotation", func(t *testing.T) {
		old := e2e.Must(t, p.Call("GET", base+"/gateway-token", nil), 200, "read token").Str("token")
		if s := e2e.GatewayStatus(t, endpoint, old); s != 404 {
			t.Fatalf("the gateway refuses its current token: HTTP %d", s)
		}
		if r := p.CallAs(old, "GET", base, nil); r.Status != 200 {
			t.Fatalf("the gateway token does not open its agent's routes: %s", r.Raw)
		}
		if r := p.CallAs(old, "GET", "/v0/agents", nil); r.Status != 403 {
			t.Fatalf("a gateway token on a workspace route: %d, want 403", r.Status)
		}
		fresh := e2e.Must(t, p.Call("POST", base+"/gateway-token/rotate", nil), 200, "rotate").Str("token")
		if r := p.CallAs(old, "GET", base, nil); r.Status != 401 {
			t.Fatalf("the rotated-out token still works on the facade: %d", r.Status)
		}
		e2e.Eventually(t, "the gateway to take the new token", func() bool {
			return e2e.GatewayStatus(t, endpoint, fresh) == 404 && e2e.GatewayStatus(t, endpoint, old) == 401
		})
	})

	t.Run("provider keys stay in the model proxy", func(t *testing.T) { checkModelProxy(t, p, llm, id, endpoint) })

	t.Run("telegram through the relay, asleep too", func(t *testing.T) { checkTelegram(t, p, tg, base) })
	t.Run("slack through the relay, asleep too", func(t *testing.T) { checkSlack(t, p, sl, slackBot, slackApp, base) })
	t.Run("discord through the relay, asleep too", func(t *testing.T) { checkDiscord(t, p, dc, base) })

	// A config written while the gateway started (the model proxy's, right after the secrets'
	// restart) makes the engine refuse to finish that start (exit 78), which the runtime starts
	// again at once rather than recording a crash and waiting out a backoff. (Other early exits
	// stay crashes: on a loaded machine the engine can miss a bound of its own boot and exit 1,
	// which the runtime restarts, as the README says.)
	if down := gatewayCrashes(p, id, "exit code 78"); down != "" {
		t.Errorf("the runtime recorded the engine's refusal of a config changed during its start as a crash:\n%s", down)
	}

	t.Run("restart and unknown version", func(t *testing.T) {
		bad := p.Call("POST", base+"/restart", map[string]string{"version": "1999.1.1"})
		if bad.Status != 400 || bad.Str("error") != "Invalid version" {
			t.Fatalf("unknown version: %s", bad.Raw)
		}
		before := pidOf(t, p, id)
		r := e2e.Must(t, p.Call("POST", base+"/restart", nil), 200, "restart")
		if r.Obj("agent")["status"] != "running" {
			t.Fatalf("after restart: %s", r.Raw)
		}
		if after := pidOf(t, p, id); after == before || !e2e.Alive(after) {
			t.Fatalf("restart kept pid %d (now %d)", before, after)
		}
	})

	t.Run("delete stops the gateway", func(t *testing.T) {
		pid := pidOf(t, p, id)
		e2e.Must(t, p.Call("DELETE", base, nil), 200, "delete")
		e2e.Eventually(t, "the agent to disappear", func() bool { return p.Call("GET", base, nil).Status == 404 })
		e2e.Eventually(t, "the gateway process to exit", func() bool { return !e2e.Alive(pid) })
	})

	// A second agent stays up until Ctrl-C, which must leave no process behind.
	second := e2e.CreateRunning(t, p, map[string]any{"name": "Left running"})
	pid := pidOf(t, p, second["id"].(string))
	p.Stop()
	if e2e.Alive(pid) {
		t.Fatalf("gateway %d survived Ctrl-C", pid)
	}
}

// pidOf reads the local runtime's pid file of an agent.
func pidOf(t *testing.T, p *e2e.Platform, id string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(p.StateDir, "runtime", "agents", "dev", id, "gateway.pid"))
	if err != nil {
		t.Fatalf("pid of %s: %v", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("pid file of %s: %q", id, raw)
	}
	return pid
}

// specRestarts counts the runtime's restarts of agent id's gateway for a new spec (its config,
// environment or engine changed, or a restart was asked for) in the dev log so far: what a
// setup that is applied live must not cause.
func specRestarts(p *e2e.Platform, id string) int {
	n := 0
	for _, l := range strings.Split(p.Log.String(), "\n") {
		if strings.Contains(l, `"msg":"restarting gateway for a new spec"`) && strings.Contains(l, `"agent":"dev/`+id+`"`) {
			n++
		}
	}
	return n
}

// gatewayCrashes is what the runtime logged of agent id's gateway going down by itself with
// what in its line ("" none).
func gatewayCrashes(p *e2e.Platform, id, what string) string {
	var out []string
	for _, l := range strings.Split(p.Log.String(), "\n") {
		if strings.Contains(l, `"msg":"gateway down"`) && strings.Contains(l, `"agent":"dev/`+id+`"`) && strings.Contains(l, what) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// gatewayEvents is what the runtime logged of agent id's gateway (its starts, stops, exits,
// checkpoints, health), for a message that says why its pid changed.
func gatewayEvents(p *e2e.Platform, id string) string {
	var out []string
	for _, l := range strings.Split(p.Log.String(), "\n") {
		if strings.Contains(l, `"logger":"runtime"`) && strings.Contains(l, `"agent":"dev/`+id+`"`) {
			out = append(out, l)
		}
	}
	return e2e.Tail(strings.Join(out, "\n"), 30)
}

// checkNoSpecRestart fails when the gateway of agent id was restarted since before
// (specRestarts then) while pid (then) was its gateway: for its spec (the runtime's own log
// line), or for any other reason (its pid changed: it died and the runtime started it again),
// with what the runtime said and the gateway's log.
func checkNoSpecRestart(t *testing.T, p *e2e.Platform, id, what string, pid, before int) {
	t.Helper()
	now := pidOf(t, p, id)
	if specRestarts(p, id) > before {
		t.Fatalf("setting up %s restarted the gateway for its spec (pid %d, then %d); the runtime said:\n%s", what, pid, now, gatewayEvents(p, id))
	}
	if now != pid {
		// A gateway that died: seen with restored gateways (from a checkpoint or the template)
		// killed by SIGBUS during a plugin's install, when the restore lost SQLite's lock on
		// its WAL index (hack/criu/patches/0004). The engine's own last words are printed too:
		// the gateway log spans both processes.
		t.Errorf("the gateway's pid changed while %s was set up (%d, then %d), not for its spec; the runtime said:\n%s\nthe gateway log (last 150 lines):\n%s", what, pid, now, gatewayEvents(p, id), gatewayLogTail(p, id, 150))
	}
}

// gatewayLogTail is the last n lines of agent id's gateway log, which spans every process its
// gateway had (a restored one's too).
func gatewayLogTail(p *e2e.Platform, id string, n int) string {
	files, _ := filepath.Glob(filepath.Join(p.StateDir, "runtime", "agents", "*", id, "gateway.log"))
	var tail string
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			tail = e2e.Tail(string(b), n)
		}
	}
	return tail
}

// awaitAnswer waits for an answer of agent id on a channel (answered); when none comes it
// fails with what tells where the message stopped: the platform's lines that name the
// channel, what the runtime said of the gateway, the gateway log's lines on the channel, its
// plugins and config reloads (the plugin's load, its connection to the relay, the message's
// handling), and the log's last lines.
func awaitAnswer(t *testing.T, p *e2e.Platform, id, channel, what string, answered func() bool) {
	t.Helper()
	if e2e.Within(e2e.EventBound, answered) {
		return
	}
	gw := gatewayLogTail(p, id, 5000)
	t.Fatalf("timed out after %s waiting for %s; the platform said of %s:\n%s\nthe runtime said:\n%s\nthe gateway log on %s, plugins and reloads:\n%s\nthe gateway log's last 60 lines:\n%s",
		e2e.EventBound, what, channel, linesNaming(p.Log.String(), 40, channel), gatewayEvents(p, id),
		channel, linesNaming(gw, 80, channel, "[plugins", "[reload]", "[gateway/channels]"), e2e.Tail(gw, 60))
}

// linesNaming is the last n lines of log that contain any of words (any case).
func linesNaming(log string, n int, words ...string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		for _, w := range words {
			if strings.Contains(strings.ToLower(l), strings.ToLower(w)) {
				out = append(out, l)
				break
			}
		}
	}
	return e2e.Tail(strings.Join(out, "\n"), n)
}
