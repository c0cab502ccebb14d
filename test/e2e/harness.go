// Package e2e is the harness of the end-to-end tests, which drive `agentplane dev` as a user
// does, with the real OpenClaw engine: the binary is built, started on a fresh state
// directory, and used over HTTP and kubectl-style API calls until it is stopped with SIGINT.
// The tests live in two packages that `go test ./...` runs side by side: devmode (the local
// runtime) and realnode (the kube runtime on a real node, as root). The workspace checks
// (Check*) are the ones both run against their runtime.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

// EngineDir is the real engine install (make test exports AGENTPLANE_ENGINE_DIR).
func EngineDir(t testing.TB) string {
	return InstalledEngine(t, "AGENTPLANE_ENGINE_DIR")
}

// PreviousEngineDir is the engine release before the pinned one (make test exports
// AGENTPLANE_PREVIOUS_ENGINE_DIR).
func PreviousEngineDir(t testing.TB) string {
	return InstalledEngine(t, "AGENTPLANE_PREVIOUS_ENGINE_DIR", "--previous")
}

// InstalledEngine is the engine dir named by env, or where hack/install-engine.sh with args
// installs it.
func InstalledEngine(t testing.TB, env string, args ...string) string {
	t.Helper()
	if os.Getenv("AGENTPLANE_SKIP_REAL_ENGINE") == "1" {
		testenv.Skip(t, "AGENTPLANE_SKIP_REAL_ENGINE=1: the real-engine end-to-end test is skipped on request")
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

// DevLog is the file a dev platform writes its output into.
type DevLog struct{ path string }

// String is the output so far.
func (l *DevLog) String() string {
	b, _ := os.ReadFile(l.path)
	return string(b)
}

// Platform is a running `agentplane dev`.
type Platform struct {
	t        testing.TB
	Cmd      *exec.Cmd
	StateDir string
	URL      string
	Token    string
	// Log is dev's output (stdout and stderr).
	Log     *DevLog
	done    chan error
	stopped bool
}

// built is the agentplane binary and probe a test binary builds once and its tests share
// (Main removes them): every platform a package starts runs the same build.
var built struct {
	once            sync.Once
	dir, bin, probe string
	err             error
}

// BuildAgentplane builds, as make build does, the agentplane binary and beside it the gateway
// image's probe, both static (images of them hold no C library) and reproducible, and returns
// their paths.
// The package's tests share one build (its TestMain calls Main, which removes it).
func BuildAgentplane(t testing.TB) (bin, probe string) {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "agentplane-e2e-bin-"); built.err == nil {
			built.bin, built.probe, built.err = buildAgentplane(built.dir)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin, built.probe
}

// shipped is the manager binary as the shipped image has it, built once per test binary.
var shipped struct {
	once sync.Once
	bin  string
	err  error
}

// BuildShippedManager builds agentplane as the shipped image does (-tags nodevtools: no
// development tooling, Dockerfile), static, into BuildAgentplane's directory, and returns its
// path: the binary of the manager's image a test deploys.
func BuildShippedManager(t testing.TB) string {
	t.Helper()
	BuildAgentplane(t)
	shipped.once.Do(func() {
		shipped.bin = filepath.Join(built.dir, "agentplane-shipped")
		shipped.err = goBuildStatic(testenv.RepoRoot(), shipped.bin, "./cmd/agentplane", "-tags", ShippedTags)
	})
	if shipped.err != nil {
		t.Fatal(shipped.err)
	}
	return shipped.bin
}

// ShippedTags are the build tags of the shipped image's agentplane (the Dockerfile's): no
// development tooling.
const ShippedTags = "nodevtools"

// goBuildStatic builds pkg of the module in dir into out, static (CGO_ENABLED=0: images of it
// hold no C library) and with -trimpath (the same source gives the same bytes in any checkout,
// so the images keyed by a binary's bytes are built once, not once per clone, and the tests'
// compiled packages are reused), plus the go build flags extra.
func goBuildStatic(dir, out, pkg string, extra ...string) error {
	args := append(append([]string{"build", "-trimpath"}, extra...), "-o", out, pkg)
	build := exec.Command("go", args...)
	build.Dir = dir
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if output, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, output)
	}
	return nil
}

// SharedTemplateDir is where the platforms StartDev starts keep the engines' template
// gateways: one dir per test binary (each engine's template is made once per package run),
// removed with its build (Main).
func SharedTemplateDir(t testing.TB) string {
	t.Helper()
	BuildAgentplane(t)
	return filepath.Join(built.dir, "templates")
}

// SharedCompileCacheDir is where the platforms StartDev starts seal the engines' compile
// caches: one dir per test binary, removed with its build (Main).
func SharedCompileCacheDir(t testing.TB) string {
	t.Helper()
	BuildAgentplane(t)
	return filepath.Join(built.dir, "compile-cache")
}

func buildAgentplane(dir string) (bin, probe string, err error) {
	bin, probe = filepath.Join(dir, "agentplane"), filepath.Join(dir, "agentplane-probe")
	for out, pkg := range map[string]string{bin: "./cmd/agentplane", probe: "./cmd/agentplane-probe"} {
		if err := goBuildStatic(testenv.RepoRoot(), out, pkg); err != nil {
			return "", "", err
		}
	}
	// CRIU and the reseed addon beside the binary, as make run has them in bin/ (make
	// sandbox-packages builds them): the platform checkpoints suspended gateways and gives new
	// agents copies of their engine's template (agentplane dev's defaults) where the host can.
	for _, name := range []string{"criu", local.ReseedName} {
		src, err := filepath.EvalSymlinks(filepath.Join(testenv.RepoRoot(), "bin", name))
		if err != nil {
			continue // not built: the platform says what it does without
		}
		if err := os.Symlink(src, filepath.Join(dir, name)); err != nil {
			return "", "", err
		}
	}
	return bin, probe, nil
}

// GatewayTemplates reports whether the platforms StartDev starts give new agents copies of
// their engine's template: as root, with CRIU and the reseed addon in the checkout's bin/.
func GatewayTemplates() bool {
	for _, name := range []string{"criu", local.ReseedName} {
		if _, err := os.Stat(filepath.Join(testenv.RepoRoot(), "bin", name)); err != nil {
			return false
		}
	}
	return os.Geteuid() == 0
}

// Main runs a package's end-to-end tests (its TestMain: os.Exit(e2e.Main(m))) and then
// removes what they shared: the build of BuildAgentplane and the compile caches beside it.
func Main(m *testing.M) int {
	code := m.Run()
	if built.dir != "" {
		if err := os.RemoveAll(built.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return code
}

// StartDev builds the binary and starts `agentplane dev` on a fresh state directory, with
// the extra flags args.
func StartDev(t testing.TB, engine string, args ...string) *Platform {
	t.Helper()
	bin, _ := BuildAgentplane(t)
	p := &Platform{t: t, StateDir: t.TempDir(), Log: &DevLog{path: filepath.Join(t.TempDir(), "dev.log")}, done: make(chan error, 1)}
	// The platforms of one test binary share the engines' compile caches (each engine is
	// warmed once per package run, not once per platform: a warm-up is a gateway boot).
	p.Cmd = exec.Command(bin, append([]string{"dev", "--state-dir", p.StateDir, "--control-plane-dir", kubeenv.AssetsDir(),
		"--engine-dir", engine, "--api-addr", "127.0.0.1:0", "--compile-cache-dir", SharedCompileCacheDir(t), "--template-dir", SharedTemplateDir(t)}, args...)...)
	// dev writes into a file, not a pipe: a dev that outlives a dead test binary (below)
	// writes on (a broken pipe would end it mid-stop).
	out, err := os.OpenFile(p.Log.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // dev holds its own copy
	p.Cmd.Stdout, p.Cmd.Stderr = out, out
	// A test binary that dies (its -timeout's panic, a kill) interrupts dev, which then stops
	// its gateways and control plane as on Ctrl-C; without it they would outlive the test.
	// In a process group of its own, dev is not killed with the test's group (a terminal's
	// Ctrl-C, a job's end) before that stop is done.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig follows the OS thread that forked dev, not the process: hold the thread
		// while dev runs, so that no goroutine locking it and exiting ends the thread early.
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		if err := p.Cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.done <- p.Cmd.Wait()
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			log := p.Log.String()
			t.Logf("agentplane dev errors (last 20):\n%s", Tail(Errors(log), 20))
			t.Logf("agentplane dev output (last 60 lines):\n%s", Tail(log, 60))
			// What the engine itself said: a turn or a delivery that failed inside the gateway
			// shows there only.
			logs, _ := filepath.Glob(filepath.Join(p.StateDir, "runtime", "agents", "*", "*", "gateway.log"))
			for _, f := range logs {
				if b, err := os.ReadFile(f); err == nil {
					t.Logf("gateway log of %s (last 40 lines):\n%s", filepath.Base(filepath.Dir(f)), Tail(string(b), 40))
				}
			}
		}
		// A test that failed before its Stop: dev stops its gateways on SIGINT, before the
		// state dir is removed (a SIGKILL would leave them writing into it).
		p.InterruptIfRunning()
		if p.Cmd.ProcessState == nil {
			_ = p.Cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		if dir := os.Getenv("AGENTPLANE_E2E_LOG_DIR"); dir != "" {
			// The whole log, kept for whoever studies a run (the temp dir goes with the test).
			name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + ".log"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(p.Log.String()), 0o600); err != nil {
				t.Logf("keeping the dev log: %v", err)
			}
		}
	})
	if p.URL, p.Token, err = devenv.WaitEnvFile(p.StateDir, EventBound, p.done); err != nil {
		t.Fatalf("%v\n%s", err, p.Log.String())
	}
	return p
}

// Remote is a Platform for a facade the test did not start (an in-cluster one): only its
// calls work.
func Remote(t testing.TB, url, token string) *Platform {
	return &Platform{t: t, URL: url, Token: token}
}

// Stop sends SIGINT (Ctrl-C) and waits for a clean exit; once stopped, it does nothing.
func (p *Platform) Stop() {
	p.t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.Cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("agentplane dev exited with %v", err)
		}
	case <-time.After(EventBound):
		p.t.Fatalf("agentplane dev did not stop within %s of SIGINT", EventBound)
	}
}

// InterruptIfRunning stops a dev that still runs (a test failed before stop) with SIGINT, so
// that it stops its gateways, instead of the harness's SIGKILL that would leave them running.
func (p *Platform) InterruptIfRunning() {
	if p.Cmd.ProcessState != nil {
		return
	}
	_ = p.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(EventBound):
	}
}

// Reply is an HTTP answer.
type Reply struct {
	Status int
	Body   map[string]any
	Raw    string
}

func (p *Platform) Call(method, path string, body any) Reply {
	return p.CallAs(p.Token, method, path, body)
}

func (p *Platform) CallAs(token, method, path string, body any) Reply {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), EventBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, p.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := Reply{Status: resp.StatusCode, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func (r Reply) Obj(key string) map[string]any {
	m, _ := r.Body[key].(map[string]any)
	return m
}

func (r Reply) Str(key string) string {
	s, _ := r.Body[key].(string)
	return s
}

func Tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Errors are the lines of a platform's log at level error or above (a failed request logs its
// cause there): what a failure's last lines, busy with later requests, may no longer hold.
func Errors(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"dpanic"`) || strings.Contains(l, `"level":"panic"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Alive reports whether pid runs (testenv.Running: a zombie does not).
func Alive(pid int) bool { return testenv.Running(pid) }

// Must fails the test when r is not the expected status.
func Must(t testing.TB, r Reply, status int, what string) Reply {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.Status, status, r.Raw)
	}
	return r
}

// Rot13 is s with its ASCII letters rotated by 13 (its own inverse): console output hides
// secret values, not their rotation, so tests read values rotated (`tr A-Za-z N-ZA-Mn-za-m`).
func Rot13(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a' + (r-'a'+13)%26
		case r >= 'A' && r <= 'Z':
			return 'A' + (r-'A'+13)%26
		}
		return r
	}, s)
}

// CreateRunning creates an agent through the REST door and returns it once it runs. A create
// answers 201 with the running agent when the gateway is up within the facade's wait, and 202
// while it is still starting (the contract's two answers: a cold or loaded machine takes the
// second); either way the agent is then read until it runs, within a bound sized for such a
// machine.
func CreateRunning(t testing.TB, p *Platform, body map[string]any) map[string]any {
	t.Helper()
	r := p.Call("POST", "/v0/agents", body)
	if r.Status != 202 {
		Must(t, r, 201, "create agent")
	}
	agent := r.Obj("agent")
	id, _ := agent["id"].(string)
	if id == "" {
		t.Fatalf("create agent: no id in %s", r.Raw)
	}
	if r.Status == 201 {
		return agent
	}
	Eventually(t, "agent "+id+" to run", func() bool {
		got := p.Call("GET", "/v0/agents/"+id, nil)
		if got.Status == 200 && got.Obj("agent")["status"] == "running" {
			agent = got.Obj("agent")
			return true
		}
		return false
	})
	return agent
}
