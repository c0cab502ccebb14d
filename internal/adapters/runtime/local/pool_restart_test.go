package local_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
)

// Shutdown stops every member and removes its dir, whatever KeepRunningOnShutdown says; a
// claimed member is an agent's, and its home stays with the agent's state.
func TestPoolShutdownLeavesNothing(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run("keepRunning="+strconv.FormatBool(keep), func(t *testing.T) {
			f := newPoolFixture(t, func(o *local.Options) { o.KeepRunningOnShutdown = keep })
			setPool(t, f, 3)
			waitPool(t, f, readyN(3))
			a := newAgent("claimer")
			o := ensure(t, f, a, desired("tok-claimer-00000000"))
			if o.ClaimedFrom == "" {
				t.Fatalf("not claimed: %+v", o)
			}
			agentPID := gatewayPID(t, f, a)
			home := agentHome(t, f, a)
			waitPool(t, f, readyN(3))
			members := local.PoolMembers(f.rt, poolName)
			if err := f.rt.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, m := range members {
				if alive(m.PID) {
					t.Fatalf("member %s (pid %d) survived Shutdown", m.ID, m.PID)
				}
				if _, err := os.Stat(m.Dir); !os.IsNotExist(err) {
					t.Fatalf("member dir %s survived Shutdown: %v", m.Dir, err)
				}
			}
			if alive(agentPID) != keep {
				t.Fatalf("agent gateway alive=%v after Shutdown with KeepRunningOnShutdown=%v", alive(agentPID), keep)
			}
			if _, err := os.Stat(home); err != nil {
				t.Fatalf("the claimed home went with the pool: %v", err)
			}
			if err := f.rt.SetPool(context.Background(), poolName, runtime.PoolSpec{Version: version, Size: 1}); err == nil {
				t.Fatal("SetPool after Shutdown succeeded")
			}

			// The next manager runs the agent in its recorded home (adopted or started anew).
			opts := f.opts
			opts.Notify, opts.KeepRunningOnShutdown = nil, false
			f2 := newFixtureWith(t, opts)
			d := desired("tok-claimer-00000000")
			o2 := waitPhase(t, f2, a, d, runtime.PhaseRunning)
			if (gatewayPID(t, f2, a) == agentPID) != keep || agentHome(t, f2, a) != home || o2.ClaimedFrom != "" || o2.Endpoint != o.Endpoint {
				t.Fatalf("after a manager restart: pid %d (was %d), home %s (was %s), %+v", gatewayPID(t, f2, a), agentPID, agentHome(t, f2, a), home, o2)
			}
			waitStatus(t, o2.Endpoint, d.GatewayToken, 404)
		})
	}
}

// A manager that died left members: the next one stops their gateways and removes their dirs,
// and adopts the gateway of an agent that had claimed one.
func TestPoolManagerRestartDiscardsStaleMembers(t *testing.T) {
	f := newPoolFixture(t, func(o *local.Options) { o.KeepRunningOnShutdown = true })
	setPool(t, f, 1)
	waitPool(t, f, readyN(1))
	a := newAgent("survivor")
	d := desired("tok-survivor-0000000")
	if o := ensure(t, f, a, d); o.ClaimedFrom == "" {
		t.Fatalf("not claimed: %+v", o)
	}
	pid := gatewayPID(t, f, a)
	if err := f.rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// What a crashed manager leaves: a running member and a member dir without a process.
	stale := startStaleMember(t, f.opts.StateDir, "warm-deadbeef")
	emptyDir := filepath.Join(f.opts.StateDir, "pool", "warm-0badf00d", "home")
	if err := os.MkdirAll(emptyDir, 0o700); err != nil {
		t.Fatal(err)
	}

	opts := f.opts
	opts.Notify, opts.KeepRunningOnShutdown = nil, false
	f2 := newFixtureWith(t, opts)
	waitGone(t, stale.Process.Pid)
	for _, dir := range []string{filepath.Dir(emptyDir), filepath.Join(f.opts.StateDir, "pool", "warm-deadbeef")} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("stale member dir %s survived the restart: %v", dir, err)
		}
	}
	o := waitPhase(t, f2, a, d, runtime.PhaseRunning)
	if gatewayPID(t, f2, a) != pid {
		t.Fatalf("the claimed gateway was not adopted: pid %d, was %d", gatewayPID(t, f2, a), pid)
	}
	waitStatus(t, o.Endpoint, d.GatewayToken, 404)
	// Pools start empty: the controller sets them again.
	if s := f2.rt.PoolStatus(poolName); s.Ready+s.Booting != 0 {
		t.Fatalf("a pool survived the restart: %+v", s)
	}
}

// startStaleMember runs a fake gateway as a member of a dead manager would: in
// <stateDir>/pool/<id>/home with the runtime's marker.
func startStaleMember(t *testing.T, stateDir, id string) *exec.Cmd {
	t.Helper()
	home := filepath.Join(stateDir, "pool", id, "home")
	if err := os.MkdirAll(filepath.Join(home, ".openclaw"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := openclaw.New().InitialConfig(engine.Identity{}, "stale-token-0123456789")
	if err := os.WriteFile(filepath.Join(home, ".openclaw", "openclaw.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(filepath.Join(fakeclaw.MustEngineDir(t), "bin", "openclaw"), "gateway", "run", "--port", port, "--bind", "loopback", "--auth", "token")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "OPENCLAW_HOME=" + home, "AGENTPLANE_AGENT_HOME=" + home}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(eventBound)
	for openclaw.New().Healthy(context.Background(), "http://127.0.0.1:"+port) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the stale member did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd
}
