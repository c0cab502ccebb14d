package local_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// version is the key of the fake engine in EngineDirs; fakeVersion what it reports.
const (
	version     = engine.PinnedVersion
	fakeVersion = "2026.9.6-fake"
)

// TestMain removes the real engine's compile cache the package's runtimes share.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// shared is the compile cache dir of the runtimes that run the real engine (realEngine).
var shared struct {
	once sync.Once
	dir  string
	err  error
}

// realEngine runs the real engine of dir (AGENTPLANE_ENGINE_DIR) as version, with the compile
// cache every such runtime of this package shares (Options.CompileCacheDir): warmed by the
// first one only, as the platforms of an end-to-end package share theirs. The fake engine's
// runtimes, which test the warm-up itself, keep a cache of their own.
func realEngine(t *testing.T, dir string) func(*local.Options) {
	t.Helper()
	shared.once.Do(func() { shared.dir, shared.err = os.MkdirTemp("", "agentplane-local-compile-cache-") })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return func(o *local.Options) {
		o.EngineDirs = map[string]string{version: dir}
		o.CompileCacheDir = shared.dir
		o.HealthInterval = 100 * time.Millisecond
	}
}

// notifications records Notify calls.
type notifications struct {
	mu   sync.Mutex
	keys []types.NamespacedName
}

func (n *notifications) notify(k types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.keys = append(n.keys, k)
}

func (n *notifications) count(k types.NamespacedName) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.keys {
		if x == k {
			c++
		}
	}
	return c
}

type fixture struct {
	rt       *local.Runtime
	opts     local.Options
	notified *notifications
}

// newFixture builds a Runtime over the fake engine with fast polls. Shutdown runs at cleanup.
func newFixture(t *testing.T, mutate ...func(*local.Options)) *fixture {
	t.Helper()
	opts := local.Options{
		StateDir:              t.TempDir(),
		Engine:                openclaw.New(),
		EngineDirs:            map[string]string{version: fakeclaw.MustEngineDir(t)},
		HealthInterval:        30 * time.Millisecond,
		RunningHealthInterval: 100 * time.Millisecond,
		RestartBackoff:        local.Backoff{Initial: 200 * time.Millisecond, Max: 800 * time.Millisecond},
		StopTimeout:           3 * time.Second,
		Log:                   testr.New(t),
	}
	for _, m := range mutate {
		m(&opts)
	}
	return newFixtureWith(t, opts)
}

func newFixtureWith(t *testing.T, opts local.Options) *fixture {
	t.Helper()
	f := &fixture{opts: opts, notified: &notifications{}}
	if opts.Notify == nil {
		f.opts.Notify = f.notified.notify
	}
	rt, err := local.New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	return f
}

// stopKeptOnFailure stops, when the test fails, the gateways f's runtime keeps running past
// its Shutdown (Options.KeepRunningOnShutdown): a runtime over the same state adopts and stops
// them, so a failed test leaves no process, mount or cgroup behind.
func stopKeptOnFailure(t *testing.T, f *fixture) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = f.rt.Shutdown(ctx)
		o := f.opts
		o.KeepRunningOnShutdown, o.Notify = false, nil
		if rt, err := local.New(o); err == nil {
			_ = rt.Shutdown(ctx)
		}
	})
}

func newAgent(name string) *agentsv1.Agent {
	return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws-test", Name: name}}
}

func keyOf(a *agentsv1.Agent) types.NamespacedName {
	return types.NamespacedName{Namespace: a.Namespace, Name: a.Name}
}

func desired(token string) runtime.Desired {
	return runtime.Desired{
		EngineVersion: version, GatewayToken: token,
		Identity: engine.Identity{Name: "Tester", AgentProfile: agentsv1.AgentProfile{Emoji: "T"}},
	}
}

func ensure(t *testing.T, f *fixture, a *agentsv1.Agent, d runtime.Desired) runtime.Observed {
	t.Helper()
	o, err := f.rt.Ensure(context.Background(), a, d)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return o
}

// eventBound is how long a test here waits for an event (a phase, a process gone): sized for
// a cold, loaded 2-core machine. It bounds a wait; it is never a verdict on speed.
const eventBound = 2 * time.Minute

// waitPhase calls Ensure until it reports phase.
func waitPhase(t *testing.T, f *fixture, a *agentsv1.Agent, d runtime.Desired, phase runtime.Phase) runtime.Observed {
	t.Helper()
	return waitObserved(t, f, a, d, func(o runtime.Observed) bool { return o.Phase == phase })
}

// waitObserved calls Ensure until what it reports satisfies ok.
func waitObserved(t *testing.T, f *fixture, a *agentsv1.Agent, d runtime.Desired, ok func(runtime.Observed) bool) runtime.Observed {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	var o runtime.Observed
	for time.Now().Before(deadline) {
		if o = ensure(t, f, a, d); ok(o) {
			return o
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not observed: %+v", o)
	return o
}

// gatewayPID is the pid in the agent's gateway.pid (0 when there is none).
func gatewayPID(t *testing.T, f *fixture, a *agentsv1.Agent) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.rt.AgentDir(keyOf(a)), "gateway.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitGone waits until pid no longer runs.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after %s", pid, eventBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// invoke calls POST /tools/invoke with a nonexistent tool: 404 means the token is good, 401
// that it is not. The answer is waited for as any event is (eventBound): a gateway's first
// call after a start or a restore took over 5 s on a loaded machine (CI-equivalent run of
// 2026-12-04, beside the real node's hostile agent filling its memory and pids limits), and
// how fast it answers is not what the tests assert.
func invoke(t *testing.T, endpoint, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/tools/invoke", strings.NewReader(`{"tool":"nonexistent_tool","args":{}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: eventBound}).Do(req)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus polls invoke until it answers want.
func waitStatus(t *testing.T, endpoint, token string, want int) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for {
		got := invoke(t, endpoint, token)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("POST /tools/invoke = %d, want %d", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// alive: the pid runs and is not a zombie.
var alive = testenv.Running
