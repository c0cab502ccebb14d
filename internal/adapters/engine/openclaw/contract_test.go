package openclaw_test

// Contract tests against the real engine (openclaw 2026.9.6 from hack/install-engine.sh). They
// only run CLI commands that need no gateway (about 2 s each on a quiet machine), one after
// another: each is a Node process compiling the engine, and several at once on a loaded
// 2-core machine have run past the validate timeout.
// AGENTPLANE_ENGINE_DIR picks the engine dir; AGENTPLANE_SKIP_REAL_ENGINE=1 skips them.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// realEngineDir returns the engine dir of the real openclaw or fails the test.
func realEngineDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("AGENTPLANE_SKIP_REAL_ENGINE") == "1" {
		testenv.Skip(t, "AGENTPLANE_SKIP_REAL_ENGINE=1")
	}
	dir := os.Getenv("AGENTPLANE_ENGINE_DIR")
	if dir == "" {
		out, err := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "hack", "install-engine.sh"), "--print-dir").Output()
		if err != nil {
			t.Fatalf("hack/install-engine.sh --print-dir: %v", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "openclaw")); err != nil {
		t.Fatalf("no real engine in %s (run hack/install-engine.sh, or set AGENTPLANE_SKIP_REAL_ENGINE=1): %v", dir, err)
	}
	return dir
}

// run executes cmd the way a runtime does: the engine binary, the engine's env for home plus
// cmd.Env, and nothing else from this process's environment but PATH. The working directory
// is deliberately not home: commands must not depend on it.
func run(t *testing.T, engineDir, home string, cmd engine.Command) (stdout []byte, exitCode int) {
	t.Helper()
	e := openclaw.New()
	timeout := cmd.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(engineDir, "bin", "openclaw"), cmd.Args...)
	c.Dir = t.TempDir()
	c.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range e.Env(home, 18999) {
		c.Env = append(c.Env, k+"="+v)
	}
	for k, v := range cmd.Env {
		c.Env = append(c.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), 0
	case errors.As(err, &exitErr):
		return out.Bytes(), exitErr.ExitCode()
	default:
		t.Fatalf("openclaw %v: %v\nstderr: %s", cmd.Args, err, errOut.String())
		return nil, -1
	}
}

// validate writes config as <home>/.openclaw/candidate.json and validates it.
func validate(t *testing.T, engineDir string, config []byte) engine.ValidateResult {
	t.Helper()
	home := t.TempDir()
	if config != nil {
		if err := os.MkdirAll(filepath.Join(home, ".openclaw"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".openclaw", "candidate.json"), config, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := openclaw.New()
	out, code := run(t, engineDir, home, e.ValidateCommand(".openclaw/candidate.json"))
	res, err := e.ParseValidate(out, code)
	if err != nil {
		t.Fatalf("ParseValidate(exit %d): %v\n%s", code, err, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, ".openclaw")); config != nil && len(entries) != 1 {
		t.Errorf("validate wrote next to the candidate: %v", entries)
	}
	return res
}

func mustValid(t *testing.T, engineDir string, config []byte) {
	t.Helper()
	if res := validate(t, engineDir, config); !res.Valid {
		t.Fatalf("real engine rejects\n%s\nissues: %v", config, res.Issues)
	}
}

func TestRealEngine(t *testing.T) {
	dir := realEngineDir(t)
	e := openclaw.New()
	id := engine.Identity{Name: "Robo", AgentProfile: agentsv1.AgentProfile{Description: "Writes the daily report", Vibe: "calm and precise", Emoji: "🤖"}}

	t.Run("version", func(t *testing.T) {
		out, code := run(t, dir, t.TempDir(), e.VersionCommand())
		v, err := e.ParseVersion(out)
		if code != 0 || err != nil || v != engine.PinnedVersion {
			t.Fatalf("version %q (exit %d, %v) from %q", v, code, err, out)
		}
	})
	t.Run("initial config validates", func(t *testing.T) {
		cfg, err := e.InitialConfig(id, "tok-0123456789")
		if err != nil {
			t.Fatal(err)
		}
		mustValid(t, dir, cfg)
	})
	t.Run("initial config without token validates", func(t *testing.T) {
		cfg, err := e.InitialConfig(engine.Identity{Name: "Bare"}, "")
		if err != nil {
			t.Fatal(err)
		}
		mustValid(t, dir, cfg)
	})
	t.Run("every channel type validates", func(t *testing.T) {
		cfg, err := e.InitialConfig(id, "tok")
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range []engine.Channel{
			{Type: "telegram", Enabled: true, BotTokenEnv: "TELEGRAM_BOT_TOKEN", DMPolicy: "allowlist", AllowFrom: []string{"123456789"}},
			{Type: "slack", Enabled: true, BotTokenEnv: "SLACK_BOT_TOKEN", AppTokenEnv: "SLACK_APP_TOKEN", DMPolicy: "open", AllowFrom: []string{"*"}},
			{Type: "discord", Enabled: false, BotTokenEnv: "DISCORD_BOT_TOKEN", DMPolicy: "pairing"},
			{Type: "whatsapp", Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{"+15555550123"}},
		} {
			if cfg, err = e.SetChannel(cfg, ch); err != nil {
				t.Fatal(err)
			}
		}
		if cfg, err = e.SetGatewayToken(cfg, "rotated-token"); err != nil {
			t.Fatal(err)
		}
		mustValid(t, dir, cfg)
		// The redacted form a client sees is still a config the engine accepts.
		red, err := e.RedactConfig(cfg)
		if err != nil || bytes.Contains(red, []byte("rotated-token")) {
			t.Fatalf("redact: %v\n%s", err, red)
		}
		mustValid(t, dir, red)
		if cfg, err = e.RemoveChannel(cfg, "slack"); err != nil {
			t.Fatal(err)
		}
		mustValid(t, dir, cfg)
	})
	t.Run("rendered config with the lean defaults beside the user's validates", func(t *testing.T) {
		live, err := e.InitialConfig(id, "tok")
		if err != nil {
			t.Fatal(err)
		}
		user := []byte(`{gateway: {mode: "local"}, update: {checkOnStart: true}, plugins: {entries: {canvas: {enabled: true}}},
			models: {catalogRefresh: {url: "https://mirror.example/catalog.json"}}}`)
		cfg, err := e.RenderConfig(engine.Render{Base: user, Live: live, Managed: []string{"telegram", "slack"},
			Channels: []engine.Channel{
				{Type: "telegram", Enabled: true, BotTokenEnv: "TELEGRAM_BOT_TOKEN"},
				{Type: "slack", Enabled: true, BotTokenEnv: "SLACK_BOT_TOKEN", AppTokenEnv: "SLACK_APP_TOKEN"},
			},
			ModelProviders: []engine.ModelProvider{{Name: "anthropic", BaseURL: "http://127.0.0.1:1/llm/anthropic", APIKey: "apx1.a.b"}}})
		if err != nil {
			t.Fatal(err)
		}
		mustValid(t, dir, cfg)
	})
	t.Run("invalid config gives issues", func(t *testing.T) {
		cfg, _ := e.InitialConfig(id, "tok")
		bad := append(bytes.TrimSpace(cfg[:len(cfg)-2]), []byte(`, "bogusTopLevel": 1}`)...)
		res := validate(t, dir, bad)
		if res.Valid || len(res.Issues) != 1 || !strings.Contains(res.Issues[0], `Unrecognized key: "bogusTopLevel"`) || !strings.Contains(res.Output, `"issues"`) {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("JSON5 syntax error", func(t *testing.T) {
		res := validate(t, dir, []byte("{ gateway: { mode: 'local' }\n"))
		if res.Valid || len(res.Issues) == 0 || !strings.Contains(res.Issues[0], "JSON5 parse failed") {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		res := validate(t, dir, nil)
		if res.Valid || len(res.Issues) != 1 || res.Issues[0] != "file not found" {
			t.Fatalf("got %+v", res)
		}
	})
}
