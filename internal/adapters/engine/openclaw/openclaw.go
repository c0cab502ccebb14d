// Package openclaw is the engine.Engine of OpenClaw 2026.9.6 (npm package `openclaw`).
//
// Facts it relies on (verified against the real engine, see the contract test):
//   - Every path OpenClaw uses derives from OPENCLAW_HOME (state dir "<home>/.openclaw"), and a
//     leading "~/" in config paths and in OPENCLAW_CONFIG_PATH expands to OPENCLAW_HOME.
//   - Without --token the gateway takes its token from gateway.auth.token in the config, or
//     from OPENCLAW_GATEWAY_TOKEN when the config has none ("config-first"), and hot-reloads a
//     changed config token without a restart.
//   - CLI commands that talk to the gateway (cron, devices) connect to 127.0.0.1 on
//     OPENCLAW_GATEWAY_PORT > gateway.port > 18789 and authenticate with the config token
//     (else OPENCLAW_GATEWAY_TOKEN). Env therefore carries the gateway port.
//   - The config is JSON5 and strict (unknown keys are errors); `config validate --json`
//     prints a verdict on stdout and exits 0 (valid) or 1 (invalid).
package openclaw

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Name is the engine name (Agent.spec.engine.name).
const Name = "openclaw"

// Paths relative to the agent's home.
const (
	StateDir     = ".openclaw"
	ConfigPath   = ".openclaw/openclaw.json"
	WorkspaceDir = ".openclaw/workspace"
	SkillsDir    = ".openclaw/workspace/skills"
	// LogFile is the gateway's file log. Without it every gateway on a host would share
	// /tmp/openclaw/openclaw-<date>.log.
	LogFile = ".openclaw/logs/openclaw.log"
)

// DefaultGatewayPort is the port OpenClaw uses when none is configured.
const DefaultGatewayPort = 18789

// Timeouts of CLI commands: cutoffs for a CLI that hangs, not for a slow one. A CLI start
// costs 1-3 s on an idle host and the gateway round trip of cron and devices about a second
// more (cron's own gateway timeout is 30 s), but on a loaded 2-core host a cold `config
// validate` has taken over 45 s, and a user's write is better late than refused.
const (
	versionTimeout  = 2 * time.Minute
	validateTimeout = 2 * time.Minute
	gatewayTimeout  = 2 * time.Minute
	// gatewayRPCTimeoutMs is a CLI call's bound on its request to the gateway (`--timeout
	// <ms>`, docs/cli/devices.md), inside gatewayTimeout.
	gatewayRPCTimeoutMs = "60000"
)

// Engine is the OpenClaw engine. The zero value is ready to use.
type Engine struct {
	// HTTPClient is used by Healthy (nil = a client that ignores proxy settings).
	HTTPClient *http.Client
}

var _ engine.Engine = (*Engine)(nil)

// New returns the OpenClaw engine.
func New() *Engine { return &Engine{} }

// Name implements engine.Engine.
func (e *Engine) Name() string { return Name }

// Layout implements engine.Engine.
func (e *Engine) Layout() engine.Layout {
	return engine.Layout{StateDir: StateDir, ConfigPath: ConfigPath, WorkspaceDir: WorkspaceDir, SkillsDir: SkillsDir}
}

// Env implements engine.Engine. HOME and OPENCLAW_HOME both point at home so that OpenClaw,
// npm (plugin installs, ~/.npm) and the XDG caches stay inside it. The embedding preset of
// gateway/embedding.md is applied except OPENCLAW_SKIP_CHANNELS: agents run chat channels.
// The runtime must not pass the host's own OPENCLAW_* variables on to engine processes.
func (e *Engine) Env(home string, gatewayPort int) map[string]string {
	home = strings.TrimRight(home, "/")
	if home == "" {
		home = "/"
	}
	join := func(rel string) string { return strings.TrimSuffix(home, "/") + "/" + rel }
	env := map[string]string{
		"HOME":                         home,
		"OPENCLAW_HOME":                home,
		"OPENCLAW_DISABLE_BONJOUR":     "1",
		"OPENCLAW_NO_RESPAWN":          "1",
		"OPENCLAW_EXEC_SHELL_SNAPSHOT": "0",
		"CLAWHUB_DISABLE_TELEMETRY":    "1",
		"XDG_CONFIG_HOME":              join(".config"),
		"XDG_CACHE_HOME":               join(".cache"),
		"XDG_DATA_HOME":                join(".local/share"),
		"XDG_STATE_HOME":               join(".local/state"),
		"npm_config_cache":             join(".npm"),
		"npm_config_update_notifier":   "false",
	}
	if gatewayPort > 0 {
		env["OPENCLAW_GATEWAY_PORT"] = strconv.Itoa(gatewayPort)
	}
	return env
}

// GatewayCommand implements engine.Engine: `gateway run --port P --bind B --auth token`. The
// token is never on the command line (it would show in ps): the gateway reads it from
// gateway.auth.token in the config, or from OPENCLAW_GATEWAY_TOKEN when the config has none.
func (e *Engine) GatewayCommand(p engine.GatewayParams) engine.Command {
	port := p.Port
	if port <= 0 {
		port = DefaultGatewayPort
	}
	bind := p.Bind
	if bind == "" {
		bind = "loopback"
	}
	return engine.Command{Args: []string{"gateway", "run", "--port", strconv.Itoa(port), "--bind", bind, "--auth", "token"}}
}

// VersionCommand implements engine.Engine.
func (e *Engine) VersionCommand() engine.Command {
	return engine.Command{Args: []string{"--version"}, Timeout: versionTimeout}
}

var versionRE = regexp.MustCompile(`(?m)^OpenClaw v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\b`)

// ParseVersion implements engine.Engine: "OpenClaw 2026.9.6 (eb377ac)" gives "2026.9.6".
func (e *Engine) ParseVersion(stdout []byte) (string, error) {
	m := versionRE.FindSubmatch(stdout)
	if m == nil {
		return "", fmt.Errorf("%w: no version in %q", engine.ErrCLI, snippet(stdout))
	}
	return string(m[1]), nil
}

// probe GETs one of the gateway's JSON probes (/healthz, /readyz) and returns its status and
// body (at most 64 KiB).
func (e *Engine) probe(ctx context.Context, baseURL, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := e.httpClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}

// Healthy implements engine.Engine: GET /healthz must answer 200 with {"ok":true,...}. Unknown
// paths answer 200 with the Control UI's HTML, so the body is checked.
func (e *Engine) Healthy(ctx context.Context, baseURL string) error {
	status, body, err := e.probe(ctx, baseURL, "/healthz")
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("gateway health: HTTP %d", status)
	}
	var h struct {
		OK *bool `json:"ok"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.OK == nil {
		return fmt.Errorf("gateway health: not a health answer: %q", snippet(body))
	}
	if !*h.OK {
		return fmt.Errorf("gateway health: not ok: %q", snippet(body))
	}
	return nil
}

var defaultHTTPClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

func (e *Engine) httpClient() *http.Client {
	if e.HTTPClient != nil {
		return e.HTTPClient
	}
	return defaultHTTPClient
}

// snippet shortens output for error messages.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
