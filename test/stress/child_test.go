package stress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	localstore "github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
)

// childEnv, when set, makes the test binary run a manager (runChildManager) instead of the
// tests: its value is the path of a childConfig. The manager-kill test needs a manager it can
// SIGKILL, and controller-runtime allows one set of controllers per process.
const childEnv = "AGENTPLANE_STRESS_CHILD"

// childConfig is what a child platform runs with.
type childConfig struct {
	Host                      string
	CAData, CertData, KeyData []byte
	StateDir                  string
	EngineDirs                map[string]string
	DefaultVersion            string
	// APIOnly runs a facade replica (no controllers, no runtime); LeaderElection makes the
	// controllers wait for the lease.
	APIOnly, LeaderElection bool
	// FilesDir, when set, is a local store shared with the other processes (skills bundles).
	FilesDir   string
	ClawHubURL string
	// FirstPort and LastPort bound the gateways' ports (zero: the runtime's default range).
	FirstPort, LastPort int
	// StaleAfter and RecountInterval: platform.Options' ReservationStaleAfter and
	// RecountInterval.
	StaleAfter, RecountInterval time.Duration
	// Kube runs the kube runtime (StatefulSets; no pod runs under envtest) instead of the
	// local one: replicas of one cluster, as a Deployment runs them.
	Kube bool
	// Lease tunes the leader election (zero durations: the platform's defaults; Enabled is
	// LeaderElection).
	Lease platform.LeaderElectionOptions
	// Bare runs controller-runtime alone with the same lease instead of the platform
	// (runBareManager): the failover benchmark's baseline.
	Bare bool
}

// childConfigFor is a childConfig reaching the API server of cfg.
func childConfigFor(cfg *rest.Config) childConfig {
	return childConfig{Host: cfg.Host, CAData: cfg.CAData, CertData: cfg.CertData, KeyData: cfg.KeyData}
}

// childListening is the stdout line that tells the parent where the child's facade listens.
const childListening = "LISTENING "

// runChildManager runs a full platform (manager with every controller, local runtime, facade)
// until SIGTERM or SIGINT, logging to stderr.
func runChildManager() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child manager:", err)
		return 1
	}
	b, err := os.ReadFile(os.Getenv(childEnv))
	if err != nil {
		return fail(err)
	}
	var c childConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true))
	logf.SetLogger(logger)
	cfg := &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData, CertData: c.CertData, KeyData: c.KeyData}}
	c.Lease.Enabled = c.LeaderElection
	if c.Bare {
		if err := runBareManager(ctx, cfg, c.Lease); err != nil && ctx.Err() == nil {
			return fail(err)
		}
		return 0
	}
	o := platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0",
		Log:            logger,
		APIOnly:        c.APIOnly,
		LeaderElection: c.Lease,
		Runtime: platform.RuntimeOptions{
			Name: platform.RuntimeLocal, StateDir: c.StateDir, EngineDirs: c.EngineDirs, DefaultVersion: c.DefaultVersion,
			Ports: local.PortRange{First: c.FirstPort, Last: c.LastPort},
		},
		ProvisionTimeout:      provisionTimeout,
		ClawHubURL:            c.ClawHubURL,
		ReservationStaleAfter: c.StaleAfter, RecountInterval: c.RecountInterval,
		APIReady: func(addr string) { fmt.Println(childListening + addr) },
	}
	if c.Kube {
		o.Runtime = platform.RuntimeOptions{Name: platform.RuntimeKube, Versions: []string{versionGood}, DefaultVersion: versionGood}
	}
	if c.FilesDir != "" {
		store, err := localstore.New(c.FilesDir)
		if err != nil {
			return fail(err)
		}
		o.Files = store
	}
	p, err := platform.New(ctx, cfg, o)
	if err != nil {
		return fail(err)
	}
	if err := p.Start(ctx); err != nil && ctx.Err() == nil {
		return fail(err)
	}
	return 0
}

// child is a manager running in a child process.
type child struct {
	cmd  *exec.Cmd
	url  string
	log  string
	done chan struct{}
}

// startChild starts a child manager with cfg and waits until its facade listens. The child is
// killed when t ends, if it still runs.
func startChild(t testing.TB, name string, cfg childConfig) *child {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &child{log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"="+cfgPath)
	c.cmd.Stderr = logFile
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), childListening); ok {
				addr <- a
			}
		}
		_ = c.cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			b, _ := os.ReadFile(c.log)
			t.Logf("log of %s (last 4 KiB):\n%s", name, tail(string(b), 4096))
		}
	})
	select {
	case a := <-addr:
		if !cfg.Bare {
			c.url = "http://" + a
		}
	case <-c.done:
		t.Fatalf("%s exited before it listened", name)
	case <-time.After(testenv.EventBound):
		t.Fatalf("%s did not listen within %s", name, testenv.EventBound)
	}
	return c
}

// exited reports whether the child's process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the child and waits (bounded) until it is gone.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
}

// stop asks the child to shut down (SIGTERM) and waits for it; false when it did not exit
// within timeout.
func (c *child) stop(timeout time.Duration) bool {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ownControlPlane starts a control plane for t alone (a test whose manager the shared
// platform's controllers must not compete with), stopped when t ends.
func ownControlPlane(t testing.TB) *kubeenv.Env {
	t.Helper()
	cp, err := kubeenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	return cp
}
