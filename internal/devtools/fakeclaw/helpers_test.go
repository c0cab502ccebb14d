package fakeclaw_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

var oc = openclaw.New()

// agent is one agent home with the fake engine, driven the way a runtime drives an engine:
// the engine's env for home and port plus the command's env, nothing else but PATH.
type agent struct {
	t    *testing.T
	dir  string // engine dir
	home string
	port int
	env  map[string]string // extra env (attached secrets, fault injection)
}

func newAgent(t *testing.T) *agent {
	t.Helper()
	return &agent{t: t, dir: fakeclaw.MustEngineDir(t), home: t.TempDir(), port: freePort(t), env: map[string]string{}}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (a *agent) command(ctx context.Context, cmd engine.Command) *exec.Cmd {
	c := exec.CommandContext(ctx, filepath.Join(a.dir, "bin", "openclaw"), cmd.Args...)
	c.Dir = os.TempDir()
	c.Env = []string{"PATH=" + os.Getenv("PATH")}
	for _, m := range []map[string]string{oc.Env(a.home, a.port), a.env, cmd.Env} {
		for k, v := range m {
			c.Env = append(c.Env, k+"="+v)
		}
	}
	return c
}

// run runs a CLI command and returns stdout, stderr and the exit code.
func (a *agent) run(cmd engine.Command) ([]byte, []byte, int) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := a.command(ctx, cmd)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), errOut.Bytes(), 0
	case errors.As(err, &exitErr):
		return out.Bytes(), errOut.Bytes(), exitErr.ExitCode()
	}
	a.t.Fatalf("run %v: %v", cmd.Args, err)
	return nil, nil, -1
}

func (a *agent) writeConfig(cfg []byte) {
	a.t.Helper()
	p := filepath.Join(a.home, oc.Layout().ConfigPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(p, cfg, 0o600); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agent) readConfig() []byte {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join(a.home, oc.Layout().ConfigPath))
	if err != nil {
		a.t.Fatal(err)
	}
	return b
}

// gateway is a running fake gateway.
type gateway struct {
	cmd            *exec.Cmd
	stdout, stderr *output
	done           chan struct{}
	code           int
}

// start starts the gateway in its own process group; the test's cleanup kills it.
func (a *agent) start() *gateway {
	a.t.Helper()
	c := a.command(context.Background(), oc.GatewayCommand(engine.GatewayParams{Port: a.port, Bind: "loopback"}))
	g := &gateway{cmd: c, stdout: newOutput(), stderr: newOutput(), done: make(chan struct{})}
	c.Stdout, c.Stderr = g.stdout, g.stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		a.t.Fatal(err)
	}
	go func() {
		err := c.Wait()
		g.code = 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			g.code = exitErr.ExitCode()
		}
		close(g.done)
	}()
	a.t.Cleanup(func() {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		<-g.done
	})
	return g
}

// exit waits for the gateway to exit and returns its exit code.
// exit waits for the gateway's exit and returns its code (testenv.EventBound ends a wait for
// a gateway that never exits).
func (g *gateway) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-g.done:
		return g.code
	case <-time.After(testenv.EventBound):
		t.Fatalf("gateway still running after %s", testenv.EventBound)
		return -1
	}
}

func (g *gateway) running() bool {
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

func (a *agent) baseURL() string { return "http://127.0.0.1:" + strconv.Itoa(a.port) }

// waitHealthy polls Healthy until it passes.
func (a *agent) waitHealthy(g *gateway) {
	a.t.Helper()
	deadline := time.Now().Add(testenv.EventBound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := oc.Healthy(ctx, a.baseURL())
		cancel()
		if err == nil {
			return
		}
		if !g.running() {
			a.t.Fatalf("gateway exited %d: %s", g.code, g.stderr)
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("gateway not healthy: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// output is what a process wrote, readable while it still writes.
type output struct {
	mu   sync.Mutex
	b    bytes.Buffer
	grew chan struct{} // closed at the next write
}

func newOutput() *output { return &output{grew: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.grew)
	o.grew = make(chan struct{})
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits until the output holds s (testenv.EventBound ends a wait for output that
// never comes).
func (o *output) waitFor(t *testing.T, s string) {
	t.Helper()
	bound := time.After(testenv.EventBound)
	for {
		o.mu.Lock()
		has, grew := strings.Contains(o.b.String(), s), o.grew
		o.mu.Unlock()
		if has {
			return
		}
		select {
		case <-grew:
		case <-bound:
			t.Fatalf("never printed %q; printed:\n%s", s, o)
		}
	}
}
