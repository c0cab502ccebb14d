package local_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// stubbornEngine is an engine dir whose gateway ignores SIGTERM and has a child in its group.
func stubbornEngine(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
if [ "$1" = "--version" ]; then echo "OpenClaw 0.0.1 (stub)"; exit 0; fi
trap '' TERM
sleep 1000 &
echo $! > "$HOME/child.pid"
while :; do sleep 1; done
`
	if err := os.WriteFile(filepath.Join(dir, "bin", "openclaw"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestStopEscalatesToSIGKILLForTheWholeGroup(t *testing.T) {
	f := newFixture(t, func(o *local.Options) {
		o.EngineDirs["stubborn"] = stubbornEngine(t)
		o.StopTimeout = 300 * time.Millisecond
	})
	a := newAgent("stubborn")
	d := desired("tok-stubborn-000000000")
	d.EngineVersion = "stubborn"
	o := ensure(t, f, a, d)
	if o.Phase != runtime.PhaseStarting || o.EngineVersion != "0.0.1" {
		t.Fatalf("start = %+v", o)
	}
	pid := gatewayPID(t, f, a)
	childFile := filepath.Join(f.rt.AgentDir(keyOf(a)), "home", "child.pid")
	var child int
	deadline := time.Now().Add(eventBound)
	for child == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(childFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	child = hostPIDIn(t, pid, child)
	if child == 0 || !alive(pid) || !alive(child) {
		t.Fatalf("stub gateway %d / child %d not running", pid, child)
	}

	// The stub ignores SIGTERM: the stop returns only because the runtime kills it once
	// StopTimeout has passed.
	d.Stopped = true
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseStopped {
		t.Fatalf("stop = %+v", o)
	}
	waitGone(t, pid)
	waitGone(t, child)
}

func TestPortAllocationSkipsPortsInUse(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	f := newFixture(t, func(o *local.Options) { o.PortRange = local.PortRange{First: taken, Last: taken + 3} })
	o := ensure(t, f, newAgent("porty"), desired("tok-porty-00000000000"))
	if o.Endpoint == "http://127.0.0.1:"+strconv.Itoa(taken) || o.Endpoint == "" {
		t.Fatalf("endpoint %q uses the taken port %d", o.Endpoint, taken)
	}
	waitPhase(t, f, newAgent("porty"), desired("tok-porty-00000000000"), runtime.PhaseRunning)

	if _, err := local.New(local.Options{StateDir: t.TempDir()}); err == nil {
		t.Fatal("New without an engine succeeded")
	}
}

func TestShutdownKillsRunningExecsAndUnlocks(t *testing.T) {
	f := newFixture(t)
	stoppedAgent(t, f, "busy", nil)
	if _, err := local.New(f.opts); err == nil || !strings.Contains(err.Error(), "another manager") {
		t.Fatalf("second runtime over the same state dir: %v", err)
	}
	type result struct {
		res runtime.ExecResult
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	started := filepath.Join(f.rt.AgentDir(keyOf(newAgent("busy"))), "home", "exec-started")
	go func() {
		res, err := f.rt.Exec(context.Background(), newAgent("busy"), runtime.ExecRequest{Argv: []string{"sh", "-c", `touch "$HOME/exec-started"; exec sleep 100`}})
		done <- result{res, err}
	}()
	for deadline := time.Now().Add(eventBound); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	if err := f.rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.res.ExitCode != 137 {
			t.Fatalf("exec after shutdown: %+v %v", r.res, r.err)
		}
	case <-time.After(eventBound):
		t.Fatal("Shutdown left the command running")
	}
	t.Logf("exec ended %s after start", time.Since(start))
	if _, err := f.rt.Exec(context.Background(), newAgent("busy"), runtime.ExecRequest{Argv: []string{"true"}}); err == nil {
		t.Fatal("Exec after Shutdown succeeded")
	}
	// The state dir is free again.
	opts := f.opts
	opts.Notify = nil
	newFixtureWith(t, opts)
}
