package local_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// TestStopSendsSIGTERMToEveryProcess: a stop gives every process of the gateway SIGTERM (its
// workers too, as an unsandboxed gateway's process group gets it): an engine that waits for its
// workers on SIGTERM stops cleanly instead of being killed at StopTimeout (OpenClaw drained for
// the whole timeout when only its launcher got the signal, and the restart lost its port).
func TestStopSendsSIGTERMToEveryProcess(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
if [ "$1" = "--version" ]; then echo "OpenClaw 0.0.1 (stub)"; exit 0; fi
trap 'wait; exit 0' TERM
sh -c 'trap "touch \"$HOME/worker-got-term\"; exit 0" TERM; touch "$HOME/worker-trapped"; while :; do sleep 0.05; done' &
while :; do sleep 0.05; done
`
	if err := os.WriteFile(filepath.Join(dir, "bin", "openclaw"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *local.Options) {
		o.EngineDirs = map[string]string{"waiter": dir}
		o.StopTimeout = 8 * time.Second
	})
	a := newAgent("waiter")
	d := desired("tok-waiter-000000000")
	d.EngineVersion = "waiter"
	ensure(t, f, a, d)
	home := filepath.Join(f.rt.AgentDir(keyOf(a)), "home")
	for deadline := time.Now().Add(eventBound); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(home, "worker-trapped")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway's worker did not set its trap")
		}
	}
	d.Stopped = true
	if o := ensure(t, f, a, d); o.Phase != runtime.PhaseStopped {
		t.Fatalf("stop = %+v", o)
	}
	if _, err := os.Stat(filepath.Join(home, "worker-got-term")); err != nil {
		t.Errorf("the gateway's worker got no SIGTERM: %v", err)
	}
}
