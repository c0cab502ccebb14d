package fakeclaw_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw/program"
)

var ident = engine.Identity{Name: "Robo", AgentProfile: agentsv1.AgentProfile{Description: "Writes reports", Vibe: "calm", Emoji: "🤖"}}

// The double plays the release the platform pins (its program keeps a constant of its own).
func TestPinsTheEnginesVersion(t *testing.T) {
	if program.PinnedVersion != engine.PinnedVersion {
		t.Fatalf("fakeclaw plays %s, the platform pins %s", program.PinnedVersion, engine.PinnedVersion)
	}
}

func TestVersion(t *testing.T) {
	a := newAgent(t)
	out, _, code := a.run(oc.VersionCommand())
	if v, err := oc.ParseVersion(out); code != 0 || err != nil || v != "2026.9.6-fake" {
		t.Fatalf("version %q %v (exit %d)", v, err, code)
	}
	a.env["FAKECLAW_VERSION"] = "2026.9.7"
	out, _, _ = a.run(oc.VersionCommand())
	if v, _ := oc.ParseVersion(out); v != "2026.9.7" {
		t.Fatalf("FAKECLAW_VERSION: %q", out)
	}
	a.env["FAKECLAW_FAIL"] = "version"
	if _, _, code := a.run(oc.VersionCommand()); code != 1 {
		t.Fatalf("FAKECLAW_FAIL=version exit %d", code)
	}
}

func TestValidate(t *testing.T) {
	a := newAgent(t)
	validate := func(cfg []byte) engine.ValidateResult {
		t.Helper()
		if cfg != nil {
			a.writeConfig(cfg)
		} else {
			os.Remove(filepath.Join(a.home, oc.Layout().ConfigPath))
		}
		out, _, code := a.run(oc.ValidateCommand(oc.Layout().ConfigPath))
		res, err := oc.ParseValidate(out, code)
		if err != nil {
			t.Fatalf("ParseValidate: %v\n%s", err, out)
		}
		return res
	}
	cfg, _ := oc.InitialConfig(ident, "tok")
	for _, ch := range []engine.Channel{
		{Type: "telegram", Enabled: true, BotTokenEnv: "TELEGRAM_BOT_TOKEN", DMPolicy: "allowlist", AllowFrom: []string{"1"}},
		{Type: "slack", Enabled: true, BotTokenEnv: "SLACK_BOT_TOKEN", AppTokenEnv: "SLACK_APP_TOKEN"},
		{Type: "discord", BotTokenEnv: "DISCORD_BOT_TOKEN"},
		{Type: "whatsapp", Enabled: true},
	} {
		cfg, _ = oc.SetChannel(cfg, ch)
	}
	if res := validate(cfg); !res.Valid || len(res.Issues) != 0 || !strings.Contains(res.Output, `"valid":true`) {
		t.Fatalf("engine-built config: %+v", res)
	}
	if res := validate([]byte("// JSON5\n{gateway:{mode:'local',},}")); !res.Valid {
		t.Fatalf("JSON5: %+v", res)
	}
	for _, tc := range []struct{ cfg, issue string }{
		{`{"gateway":{"mode":"local"},"bogus":1}`, `Unrecognized key: "bogus"`},
		{`{"gateway":{"bogusKey":1}}`, `gateway: Unrecognized key: "bogusKey"`},
		{`{"gateway":{"port":"x"}}`, "gateway.port: Invalid input: expected number, received string"},
		{`{"channels":{"foochannel":{}}}`, "channels.foochannel: unknown channel id: foochannel"},
		{`{"channels":{"telegram":{"dmPolicy":"sometimes"}}}`, "channels.telegram.dmPolicy: invalid config: must be equal to one of the allowed values"},
		{`{"channels":{"telegram":{"botToken":{"source":"vault","id":"X"}}}}`, "must have required property 'provider'"},
		{"{\n", "JSON5 parse failed"},
		{"[]", "expected object"},
	} {
		res := validate([]byte(tc.cfg))
		if res.Valid || len(res.Issues) == 0 || !strings.Contains(strings.Join(res.Issues, "\n"), tc.issue) {
			t.Errorf("%s: %+v, want an issue with %q", tc.cfg, res, tc.issue)
		}
	}
	if res := validate(nil); res.Valid || len(res.Issues) != 1 || res.Issues[0] != "file not found" {
		t.Errorf("missing file: %+v", res)
	}
	a.env["FAKECLAW_FAIL"] = "config validate"
	a.writeConfig([]byte("{}"))
	out, _, code := a.run(oc.ValidateCommand(oc.Layout().ConfigPath))
	if _, err := oc.ParseValidate(out, code); !errors.Is(err, engine.ErrCLI) {
		t.Fatalf("FAKECLAW_FAIL: %v (exit %d, %s)", err, code, out)
	}
}

func invoke(t *testing.T, baseURL, token, tool string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, baseURL+"/tools/invoke", strings.NewReader(`{"tool":"`+tool+`","args":{}}`))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestGateway(t *testing.T) {
	a := newAgent(t)
	cfg, _ := oc.InitialConfig(ident, "token-one")
	a.writeConfig(cfg)
	g := a.start()
	a.waitHealthy(g)

	for path, want := range map[string]string{"/readyz": `"ready":true`, "/startupz": `"version":"2026.9.6-fake"`, "/health": `"ok":true`} {
		if code, body := get(t, a.baseURL()+path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d %s", path, code, body)
		}
	}
	if code, body := get(t, a.baseURL()+"/livez"); code != 200 || !strings.HasPrefix(body, "<!doctype html>") {
		t.Errorf("SPA fallback = %d %q", code, body)
	}
	if code, _ := get(t, a.baseURL()+"/v1/models"); code != 404 {
		t.Errorf("/v1/models = %d", code)
	}
	if c := invoke(t, a.baseURL(), "token-one", "nonexistent_tool"); c != 404 {
		t.Errorf("right token = %d, want 404", c)
	}
	if c := invoke(t, a.baseURL(), "token-one", "sessions_list"); c != 200 {
		t.Errorf("sessions_list = %d", c)
	}
	for _, tok := range []string{"wrong", ""} {
		if c := invoke(t, a.baseURL(), tok, "nonexistent_tool"); c != 401 {
			t.Errorf("token %q = %d, want 401", tok, c)
		}
	}

	// Rotation through the config applies without a restart; a broken config keeps the last good token.
	rotated, _ := oc.SetGatewayToken(a.readConfig(), "token-two")
	a.writeConfig(rotated)
	if invoke(t, a.baseURL(), "token-two", "x") != 404 || invoke(t, a.baseURL(), "token-one", "x") != 401 {
		t.Fatal("token rotation not applied")
	}
	a.writeConfig([]byte("{ broken"))
	if invoke(t, a.baseURL(), "token-two", "x") != 404 {
		t.Fatal("broken config dropped the last good token")
	}
	a.writeConfig(rotated)

	// Cron through the engine's command builders and parsers.
	task := engine.Task{Name: "daily", Enabled: true, Schedule: engine.Schedule{Kind: "cron", Expr: "0 9 * * 1-5", TZ: "Europe/Berlin"},
		Payload: engine.Payload{Kind: "agentTurn", Message: "-- write the report"}}
	add := func(tk engine.Task) (engine.Task, error) {
		cmd, err := oc.CronAddCommand(tk)
		if err != nil {
			t.Fatal(err)
		}
		out, _, code := a.run(cmd)
		return oc.ParseCronAdd(out, code)
	}
	created, err := add(task)
	if err != nil || created.ID == "" || created.Name != "daily" || created.Payload.Message != "-- write the report" ||
		created.Schedule.TZ != "Europe/Berlin" || created.NextRunAt == "" || created.CreatedAt == "" {
		t.Fatalf("cron add: %+v %v", created, err)
	}
	task.Schedule.Expr = "0 10 * * *"
	updated, err := add(task)
	if err != nil || updated.ID != created.ID || updated.Schedule.Expr != "0 10 * * *" {
		t.Fatalf("upsert: %+v %v", updated, err)
	}
	every, err := add(engine.Task{Name: "ping", Enabled: false, Schedule: engine.Schedule{Kind: "every", EveryMs: 90000},
		Payload: engine.Payload{Kind: "systemEvent", Text: "ping"}})
	if err != nil || every.Enabled || every.Schedule.EveryMs != 90000 || every.Payload.Text != "ping" || every.NextRunAt != "" {
		t.Fatalf("every: %+v %v", every, err)
	}
	at, err := add(engine.Task{Name: "once", Enabled: true, Schedule: engine.Schedule{Kind: "at", At: "2030-01-01T10:00:00", TZ: "America/New_York"},
		Payload: engine.Payload{Message: "hi"}})
	if err != nil || at.Schedule.At != "2030-01-01T15:00:00.000Z" {
		t.Fatalf("at: %+v %v", at, err)
	}
	if _, err := add(engine.Task{Name: "bad", Enabled: true, Schedule: engine.Schedule{Kind: "cron", Expr: "99 * * *"},
		Payload: engine.Payload{Message: "x"}}); !errors.Is(err, engine.ErrCLI) || !strings.Contains(err.Error(), "CronPattern") {
		t.Fatalf("bad pattern: %v", err)
	}
	list := func() ([]engine.Task, error) {
		out, _, code := a.run(oc.CronListCommand())
		return oc.ParseCronList(out, code)
	}
	tasks, err := list()
	if err != nil || len(tasks) != 3 {
		t.Fatalf("cron list (heartbeat:main left out): %+v %v", tasks, err)
	}
	// OpenClaw's own heartbeat job is in the raw list but cannot be removed.
	raw, _, _ := a.run(engine.Command{Args: []string{"cron", "list", "--json", "--all"}})
	if !strings.Contains(string(raw), `"heartbeat:main"`) {
		t.Fatalf("no system job in the raw list: %s", raw)
	}
	out, _, code := a.run(engine.Command{Args: []string{"cron", "rm", "--json", every.ID}})
	if code != 0 || !strings.Contains(string(out), `"removed": true`) {
		t.Fatalf("cron rm: %d %s", code, out)
	}
	if out, _, code := a.run(engine.Command{Args: []string{"cron", "rm", "nope"}}); code != 1 || !strings.Contains(string(out), "Automation not found") {
		t.Fatalf("cron rm unknown: %d %s", code, out)
	}

	out, _, code = a.run(oc.DevicesListCommand())
	if d, err := oc.ParseDevices(out, code); err != nil || d.Paired == nil || d.Pending == nil {
		t.Fatalf("devices: %+v %v", d, err)
	}

	// Fault injection for one subcommand.
	a.env["FAKECLAW_FAIL"] = "cron list"
	if _, err := list(); !errors.Is(err, engine.ErrCLI) {
		t.Fatalf("FAKECLAW_FAIL=cron list: %v", err)
	}
	delete(a.env, "FAKECLAW_FAIL")

	// A CLI that does not know the port cannot reach the gateway, like the real one.
	port := a.port
	a.port = 0
	out, _, code = a.run(oc.DevicesListCommand())
	// (ErrCLI either way: nothing listens on 18789, or another gateway there refuses the token.)
	if _, err := oc.ParseDevices(out, code); !errors.Is(err, engine.ErrCLI) {
		t.Fatalf("without port: %v", err)
	}
	a.port = port

	// SIGTERM: exit 0, pid file gone; the jobs survive a restart.
	pidFile := filepath.Join(a.home, ".openclaw", "fake-gateway.json")
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatalf("pid file: %v", err)
	}
	_ = g.cmd.Process.Signal(os.Interrupt)
	if code := g.exit(t); code != 0 {
		t.Fatalf("SIGINT exit %d", code)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("pid file left: %v", err)
	}
	if _, err := list(); !errors.Is(err, engine.ErrCLI) || !strings.Contains(err.Error(), "Gateway not reachable") {
		t.Fatalf("list with the gateway down: %v", err)
	}
	g = a.start()
	a.waitHealthy(g)
	if tasks, err := list(); err != nil || len(tasks) != 2 {
		t.Fatalf("after restart: %+v %v", tasks, err)
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	if code := g.exit(t); code != 0 {
		t.Fatalf("SIGTERM exit %d", code)
	}
}

func TestGatewayStartup(t *testing.T) {
	t.Run("no config", func(t *testing.T) {
		a := newAgent(t)
		g := a.start()
		if code := g.exit(t); code != 78 || !strings.Contains(g.stderr.String(), "Missing config") {
			t.Fatalf("exit %d: %s", code, g.stderr)
		}
	})
	t.Run("invalid config", func(t *testing.T) {
		a := newAgent(t)
		a.writeConfig([]byte(`{"gateway":{"mode":"local"},"bogus":true}`))
		if code := a.start().exit(t); code != 78 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("token from the environment (no token in the config)", func(t *testing.T) {
		a := newAgent(t)
		cfg, _ := oc.InitialConfig(ident, "")
		a.writeConfig(cfg)
		a.env["OPENCLAW_GATEWAY_TOKEN"] = "env-token"
		g := a.start()
		a.waitHealthy(g)
		if invoke(t, a.baseURL(), "env-token", "x") != 404 {
			t.Fatal("env token refused")
		}
		out, _, code := a.run(oc.DevicesListCommand())
		if _, err := oc.ParseDevices(out, code); err != nil {
			t.Fatalf("CLI with the env token: %v", err)
		}
	})
	t.Run("config token wins over the environment", func(t *testing.T) {
		a := newAgent(t)
		cfg, _ := oc.InitialConfig(ident, "cfg-token")
		a.writeConfig(cfg)
		a.env["OPENCLAW_GATEWAY_TOKEN"] = "env-token"
		g := a.start()
		a.waitHealthy(g)
		if invoke(t, a.baseURL(), "cfg-token", "x") != 404 || invoke(t, a.baseURL(), "env-token", "x") != 401 {
			t.Fatal("not config-first")
		}
	})
	t.Run("FAKECLAW_FAIL_START", func(t *testing.T) {
		a := newAgent(t)
		cfg, _ := oc.InitialConfig(ident, "t")
		a.writeConfig(cfg)
		a.env["FAKECLAW_FAIL_START"] = "1"
		g := a.start()
		if code := g.exit(t); code != 1 || !strings.Contains(g.stderr.String(), "FAKECLAW_FAIL_START") {
			t.Fatalf("exit %d: %s", code, g.stderr)
		}
	})
	// The delays are checked by what happens in them, not by how long they took: a gateway
	// in a boot of an hour has said it starts but does not listen, and a signal ends it there.
	t.Run("FAKECLAW_BOOT_DELAY", func(t *testing.T) {
		a := newAgent(t)
		cfg, _ := oc.InitialConfig(ident, "t")
		a.writeConfig(cfg)
		a.env["FAKECLAW_BOOT_DELAY"] = "1h"
		g := a.start()
		g.stdout.waitFor(t, "[gateway] starting on the config read")
		if resp, err := http.Get(a.baseURL() + "/healthz"); err == nil {
			resp.Body.Close()
			t.Fatal("listening during its boot delay")
		}
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := g.exit(t); code != 0 || !strings.Contains(g.stdout.String(), "during startup") {
			t.Fatalf("a signal during the boot: exit %d: %s", code, g.stdout)
		}
	})
	// A gateway that crashes in an hour listens and serves meanwhile; one that crashes at once
	// crashes after it listened, exit 1, naming the setting.
	t.Run("FAKECLAW_CRASH_AFTER", func(t *testing.T) {
		a := newAgent(t)
		cfg, _ := oc.InitialConfig(ident, "t")
		a.writeConfig(cfg)
		a.env["FAKECLAW_CRASH_AFTER"] = "1h"
		a.waitHealthy(a.start())
		b := newAgent(t)
		b.writeConfig(cfg)
		b.env["FAKECLAW_CRASH_AFTER"] = "1ms"
		g := b.start()
		if code := g.exit(t); code != 1 || !strings.Contains(g.stderr.String(), "FAKECLAW_CRASH_AFTER") {
			t.Fatalf("exit %d: %s", code, g.stderr)
		}
		if !strings.Contains(g.stdout.String(), "[gateway] ready") {
			t.Fatalf("crashed without listening first: %s", g.stdout)
		}
	})
}

func TestEngineDirLayout(t *testing.T) {
	a := newAgent(t)
	st, err := os.Stat(filepath.Join(a.dir, "bin", "openclaw"))
	if err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("bin/openclaw: %v %v", st, err)
	}
}
