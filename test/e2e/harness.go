// Package e2e drives `agentplane dev` as a user does, with the real OpenClaw engine: the
// binary is built, started on a fresh state directory, and used over HTTP and kubectl-style
// API calls until it is stopped with SIGINT.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/devenv"
	"github.com/agentplane/agentplane/internal/testenv"
)

// engineDir is the real engine install (make test exports AGENTPLANE_ENGINE_DIR).
func engineDir(t testing.TB) string {
	return installedEngine(t, "AGENTPLANE_ENGINE_DIR")
}

// previousEngineDir is the engine release before the pinned one (make test exports
// AGENTPLANE_PREVIOUS_ENGINE_DIR).
func previousEngineDir(t testing.TB) string {
	return installedEngine(t, "AGENTPLANE_PREVIOUS_ENGINE_DIR", "--previous")
}

// installedEngine is the engine dir named by env, or where hack/install-engine.sh with args
// installs it.
func installedEngine(t testing.TB, env string, args ...string) string {
	t.Helper()
	if os.Getenv("AGENTPLANE_SKIP_REAL_ENGINE") == "1" {
		t.Skip("AGENTPLANE_SKIP_REAL_ENGINE=1: the real-engine end-to-end test is skipped on request")
	}
	dir := os.Getenv(env)
	if dir == "" {
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "install-engine.sh"), append(args, "--print-dir")...).Output()
		if err != nil {
			t.Fatalf("locate the engine: %v", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "openclaw")); err != nil {
		t.Fatalf("the real engine is not installed in %s: run `make engine` (or make test)", dir)
	}
	return dir
}

// platform is a running `agentplane dev`.
type platform struct {
	t        testing.TB
	cmd      *exec.Cmd
	stateDir string
	url      string
	token    string
	log      *bytes.Buffer
	done     chan error
	stopped  bool
}

// buildAgentplane builds, as make build does, the agentplane binary and beside it the gateway
// image's probe, both static (images of them hold no C library), and returns their paths.
func buildAgentplane(t testing.TB) (bin, probe string) {
	t.Helper()
	dir := t.TempDir()
	bin, probe = filepath.Join(dir, "agentplane"), filepath.Join(dir, "agentplane-probe")
	for out, pkg := range map[string]string{bin: "./cmd/agentplane", probe: "./cmd/agentplane-probe"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir = testenv.RepoRoot()
		build.Env = append(build.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	return bin, probe
}

// startDev builds the binary and starts `agentplane dev` on a fresh state directory, with
// the extra flags args.
func startDev(t testing.TB, engine string, args ...string) *platform {
	t.Helper()
	bin, _ := buildAgentplane(t)
	p := &platform{t: t, stateDir: t.TempDir(), log: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"dev", "--state-dir", p.stateDir, "--control-plane-dir", testenv.AssetsDir(),
		"--engine-dir", engine, "--api-addr", "127.0.0.1:0"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("agentplane dev output (last 60 lines):\n%s", tail(p.log.String(), 60))
		}
	})
	var err error
	if p.url, p.token, err = devenv.WaitEnvFile(p.stateDir, 6*time.Minute, p.done); err != nil {
		t.Fatalf("%v\n%s", err, p.log.String())
	}
	return p
}

// stop sends SIGINT (Ctrl-C) and waits for a clean exit; once stopped, it does nothing.
func (p *platform) stop() {
	p.t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("agentplane dev exited with %v", err)
		}
	case <-time.After(2 * time.Minute):
		p.t.Fatal("agentplane dev did not stop within 2 minutes of SIGINT")
	}
}

// reply is an HTTP answer.
type reply struct {
	status int
	body   map[string]any
	raw    string
}

func (p *platform) call(method, path string, body any) reply {
	return p.callAs(p.token, method, path, body)
}

func (p *platform) callAs(token, method, path string, body any) reply {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, p.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func (r reply) obj(key string) map[string]any {
	m, _ := r.body[key].(map[string]any)
	return m
}

func (r reply) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// alive reports whether pid runs.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// must fails the test when r is not the expected status.
func must(t testing.TB, r reply, status int, what string) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
	}
	return r
}
