package openclaw

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLayoutAndEnv(t *testing.T) {
	e := New()
	if e.Name() != "openclaw" {
		t.Fatalf("Name = %q", e.Name())
	}
	want := engine.Layout{StateDir: ".openclaw", ConfigPath: ".openclaw/openclaw.json",
		WorkspaceDir: ".openclaw/workspace", SkillsDir: ".openclaw/workspace/skills"}
	if got := e.Layout(); got != want {
		t.Fatalf("Layout = %+v", got)
	}
	env := e.Env("/home/a/", 18801)
	for k, v := range map[string]string{
		"HOME": "/home/a", "OPENCLAW_HOME": "/home/a", "OPENCLAW_DISABLE_BONJOUR": "1",
		"OPENCLAW_NO_RESPAWN": "1", "OPENCLAW_EXEC_SHELL_SNAPSHOT": "0", "CLAWHUB_DISABLE_TELEMETRY": "1",
		"OPENCLAW_GATEWAY_PORT": "18801", "npm_config_cache": "/home/a/.npm", "XDG_CACHE_HOME": "/home/a/.cache",
	} {
		if env[k] != v {
			t.Errorf("Env[%s] = %q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"OPENCLAW_SKIP_CHANNELS", "OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_CONFIG_PATH", "OPENCLAW_STATE_DIR"} {
		if _, ok := env[k]; ok {
			t.Errorf("Env sets %s", k)
		}
	}
	if _, ok := e.Env("/h", 0)["OPENCLAW_GATEWAY_PORT"]; ok {
		t.Error("port 0 must leave OPENCLAW_GATEWAY_PORT unset (engine default / gateway.port)")
	}
	for k, v := range e.Env("/h", 1) {
		if strings.Contains(v, "/tmp") || (strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "/h")) {
			t.Errorf("Env[%s] = %q points outside home", k, v)
		}
	}
}

func TestGatewayCommand(t *testing.T) {
	got := New().GatewayCommand(engine.GatewayParams{Port: 18801, Bind: "lan"})
	want := []string{"gateway", "run", "--port", "18801", "--bind", "lan", "--auth", "token"}
	if !reflect.DeepEqual(got.Args, want) || got.Timeout != 0 || len(got.Env) != 0 {
		t.Fatalf("GatewayCommand = %+v", got)
	}
	for _, a := range got.Args {
		if strings.Contains(a, "token") && a != "token" {
			t.Fatalf("token on the command line: %v", got.Args)
		}
	}
	if d := New().GatewayCommand(engine.GatewayParams{}); d.Args[3] != "18789" || d.Args[5] != "loopback" {
		t.Fatalf("defaults: %v", d.Args)
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{string(golden(t, "version.txt")), "2026.9.6"},
		{"OpenClaw 2026.9.6-fake (fake)\n", "2026.9.6-fake"},
		{"some banner\nOpenClaw 2026.10.1-beta.2 (abc)\n", "2026.10.1-beta.2"},
	} {
		got, err := New().ParseVersion([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("ParseVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "error: unknown option", "OpenClaw dev"} {
		if _, err := New().ParseVersion([]byte(in)); !errors.Is(err, engine.ErrCLI) {
			t.Errorf("ParseVersion(%q) err = %v, want ErrCLI", in, err)
		}
	}
	if c := New().VersionCommand(); !reflect.DeepEqual(c.Args, []string{"--version"}) || c.Timeout <= 0 {
		t.Errorf("VersionCommand = %+v", c)
	}
}

func TestValidateCommand(t *testing.T) {
	for in, want := range map[string]string{
		".openclaw/candidate.json":   "~/.openclaw/candidate.json",
		"./.openclaw/candidate.json": "~/.openclaw/candidate.json",
		"/abs/openclaw.json":         "/abs/openclaw.json",
	} {
		c := New().ValidateCommand(in)
		if !reflect.DeepEqual(c.Args, []string{"config", "validate", "--json"}) || c.Env["OPENCLAW_CONFIG_PATH"] != want || c.Timeout <= 0 {
			t.Errorf("ValidateCommand(%q) = %+v", in, c)
		}
	}
}

func TestParseValidate(t *testing.T) {
	for _, tc := range []struct {
		file   string
		exit   int
		valid  bool
		issues []string
	}{
		{"validate-valid.json", 0, true, nil},
		{"validate-unknown.json", 1, false, []string{`gateway: Unrecognized key: "bogusKey"`}},
		{"validate-syntax.json", 1, false, []string{"JSON5 parse failed: SyntaxError: JSON5: invalid end of input at 2:1"}},
		{"validate-type.json", 1, false, []string{"gateway.port: Invalid input: expected number, received string"}},
		{"validate-enum.json", 1, false, []string{`channels.telegram.dmPolicy: invalid config: must be equal to one of the allowed values (allowed: "pairing", "allowlist", "open", "disabled")`}},
		{"validate-missing.json", 1, false, []string{"file not found"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out := golden(t, tc.file)
			res, err := New().ParseValidate(out, tc.exit)
			if err != nil {
				t.Fatal(err)
			}
			if res.Valid != tc.valid || !reflect.DeepEqual(res.Issues, tc.issues) {
				t.Fatalf("got %+v", res)
			}
			if res.Output != strings.TrimSpace(string(out)) {
				t.Fatalf("Output = %q", res.Output)
			}
		})
	}
	for _, tc := range []struct {
		name string
		out  string
		exit int
	}{
		{"crash", "", 2},
		{"killed", string(golden(t, "validate-valid.json")), 137},
		{"not json", "Config valid: /x\n", 0},
		{"generic cli error", `{"ok":false,"error":{"type":"cli_error","message":"boom"}}`, 1},
		{"verdict contradicts exit code", `{"valid":false,"issues":[]}`, 0},
	} {
		if _, err := New().ParseValidate([]byte(tc.out), tc.exit); !errors.Is(err, engine.ErrCLI) {
			t.Errorf("%s: err = %v, want ErrCLI", tc.name, err)
		}
	}
}

func TestParseDevices(t *testing.T) {
	d, err := New().ParseDevices(golden(t, "devices-empty.json"), 0)
	if err != nil || d.Pending == nil || d.Paired == nil || len(d.Pending)+len(d.Paired) != 0 {
		t.Fatalf("empty: %+v %v", d, err)
	}
	d, err = New().ParseDevices(golden(t, "devices-paired.json"), 0)
	if err != nil || len(d.Paired) != 1 || d.Paired[0]["displayName"] != "OpenClaw CLI" {
		t.Fatalf("paired: %+v %v", d, err)
	}
	for _, f := range []string{"devices-unreachable.json", "devices-token-mismatch.json", "devices-no-credentials.json"} {
		_, err := New().ParseDevices(golden(t, f), 1)
		if !errors.Is(err, engine.ErrCLI) {
			t.Errorf("%s: err = %v", f, err)
		}
	}
	_, err = New().ParseDevices(golden(t, "devices-unreachable.json"), 1)
	if !strings.Contains(err.Error(), "Gateway not reachable") {
		t.Errorf("error loses the CLI's message: %v", err)
	}
	if _, err := New().ParseDevices([]byte(`{"ok":false,"error":{"message":"x"}}`), 0); !errors.Is(err, engine.ErrCLI) {
		t.Errorf("ok:false with exit 0: %v", err)
	}
	if c := New().DevicesListCommand(); !reflect.DeepEqual(c.Args, []string{"devices", "list", "--json", "--timeout", "60000"}) {
		t.Errorf("DevicesListCommand = %+v", c)
	}
}

func TestHealthy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte(`{"ok":true,"status":"live"}`))
		default:
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<!doctype html><html></html>"))
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := New().Healthy(ctx, srv.URL); err != nil {
		t.Fatalf("healthy gateway: %v", err)
	}
	if err := New().Healthy(ctx, srv.URL+"/"); err != nil {
		t.Fatalf("trailing slash: %v", err)
	}
	// A server that answers every path with the SPA fallback (e.g. another web app) is not a gateway.
	spa := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<!doctype html>"))
	}))
	defer spa.Close()
	if err := New().Healthy(ctx, spa.URL); err == nil {
		t.Fatal("HTML answer counted as healthy")
	}
	for _, body := range []string{`{"ok":false}`, `{"status":"live"}`} {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
		if err := New().Healthy(ctx, s.URL); err == nil {
			t.Errorf("%s counted as healthy", body)
		}
		s.Close()
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"ok":true}`))
	}))
	defer down.Close()
	if err := New().Healthy(ctx, down.URL); err == nil {
		t.Fatal("503 counted as healthy")
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if err := New().Healthy(ctx, closed.URL); err == nil {
		t.Fatal("closed port counted as healthy")
	}
}
