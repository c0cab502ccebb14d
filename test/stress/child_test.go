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

	"github.com/agentplane/agentplane/internal/platform"
)

// childEnv, when set, makes the test binary run a manager (runChildManager) instead of the
// tests: its value is the path of a childConfig. The manager-kill test needs a manager it can
// SIGKILL, and controller-runtime allows one set of controllers per process.
const childEnv = "AGENTPLANE_STRESS_CHILD"

// childConfig is what a child manager runs with.
type childConfig struct {
	Host                      string
	CAData, CertData, KeyData []byte
	StateDir                  string
	EngineDirs                map[string]string
	DefaultVersion            string
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
	p, err := platform.New(ctx, cfg, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0",
		Log: logger,
		Runtime: platform.RuntimeOptions{
			Name: platform.RuntimeLocal, StateDir: c.StateDir, EngineDirs: c.EngineDirs, DefaultVersion: c.DefaultVersion,
		},
		ProvisionTimeout: provisionTimeout,
		APIReady:         func(addr string) { fmt.Println(childListening + addr) },
	})
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
func startChild(t *testing.T, name string, cfg childConfig) *child {
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
		c.url = "http://" + a
	case <-c.done:
		t.Fatalf("%s exited before it listened", name)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not listen within 60s", name)
	}
	return c
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
