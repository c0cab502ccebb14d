package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// A new agent takes a ready member: its identity and token are bound without a restart, the
// process, port and home become the agent's, every runtime operation uses that home, and the
// pool refills in the background.
func TestPoolClaimBindRefill(t *testing.T) {
	f := newPoolFixture(t)
	setPool(t, f, 2)
	waitPool(t, f, readyN(2))
	before := local.PoolMembers(f.rt, poolName)
	tokens := map[string]string{}
	for _, m := range before {
		tokens[m.ID] = memberToken(t, m.Home)
	}

	a := newAgent("pooled")
	d := desired("tok-pooled-0123456789")
	o := ensure(t, f, a, d)
	if o.Phase != runtime.PhaseRunning || !strings.HasPrefix(o.ClaimedFrom, poolName+"/") {
		t.Fatalf("Ensure of a new agent = %+v, want Running from the pool", o)
	}
	m := member(t, before, strings.TrimPrefix(o.ClaimedFrom, poolName+"/"))
	if o.Endpoint != "http://127.0.0.1:"+itoa(m.Port) || gatewayPID(t, f, a) != m.PID || !alive(m.PID) {
		t.Fatalf("the agent does not run the member's gateway: %+v, member %+v, pid %d", o, m, gatewayPID(t, f, a))
	}
	waitStatus(t, o.Endpoint, d.GatewayToken, 404)
	waitStatus(t, o.Endpoint, tokens[m.ID], 401)
	cfg, _ := os.ReadFile(filepath.Join(m.Home, ".openclaw", "openclaw.json"))
	if !strings.Contains(string(cfg), "Tester") || !strings.Contains(string(cfg), d.GatewayToken) {
		t.Fatalf("the agent's identity and token are not in the config:\n%s", cfg)
	}
	state, _ := os.ReadFile(filepath.Join(f.rt.AgentDir(keyOf(a)), "state.json"))
	if !strings.Contains(string(state), `"home": "`+m.Home+`"`) || strings.Contains(string(state), d.GatewayToken) {
		t.Fatalf("state.json: %s", state)
	}

	// Exec, files and archives work in the member's home, now the agent's.
	res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"sh", "-c", "pwd; echo hi > made-here"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != filepath.Join(m.Home, ".openclaw", "workspace") {
		t.Fatalf("exec: %q %v", res.Stdout, err)
	}
	if b, err := f.rt.ReadFile(context.Background(), a, ".openclaw/workspace/made-here"); err != nil || string(b) != "hi\n" {
		t.Fatalf("ReadFile: %q %v", b, err)
	}
	if err := f.rt.WriteFile(context.Background(), a, ".openclaw/workspace/notes.md", []byte("n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.Home, ".openclaw", "workspace", "notes.md")); err != nil {
		t.Fatal(err)
	}
	var tar strings.Builder
	if err := f.rt.ArchiveWorkspace(context.Background(), a, &tar); err != nil || !strings.Contains(tar.String(), "notes.md") {
		t.Fatalf("archive: %v", err)
	}

	// The pool refills with a new member; the claim is counted.
	s := waitPool(t, f, readyN(2))
	if s.Claimed != 1 || len(s.Claims) != 1 || s.Claims[0].Agent != keyOf(a) || s.Claims[0].Member != m.ID || s.Claims[0].Seq != 1 {
		t.Fatalf("pool status after a claim: %+v", s)
	}
	for _, n := range local.PoolMembers(f.rt, poolName) {
		if n.ID == m.ID || n.PID == m.PID {
			t.Fatalf("the claimed member is still in the pool: %+v", n)
		}
	}

	// Later Ensures change nothing; a spec change restarts the agent in its home, on its port.
	if o2 := ensure(t, f, a, d); o2.Phase != runtime.PhaseRunning || o2.ClaimedFrom != "" || gatewayPID(t, f, a) != m.PID {
		t.Fatalf("Ensure again = %+v", o2)
	}
	d.Env = map[string]string{"SPEC_CHANGED": "1"}
	ensure(t, f, a, d)
	o3 := waitPhase(t, f, a, d, runtime.PhaseRunning)
	if pid := gatewayPID(t, f, a); pid == m.PID || o3.Endpoint != o.Endpoint || o3.Restarts != 0 {
		t.Fatalf("restart after a spec change: pid %d (member %d), %+v", pid, m.PID, o3)
	}
	waitGone(t, m.PID)
	if b, err := f.rt.ReadFile(context.Background(), a, ".openclaw/workspace/notes.md"); err != nil || string(b) != "n" {
		t.Fatalf("the restarted gateway lost the home: %q %v", b, err)
	}
	log, _ := os.ReadFile(filepath.Join(f.rt.AgentDir(keyOf(a)), "gateway.log"))
	if strings.Count(string(log), "--- agentplane") != 2 {
		t.Fatalf("the agent's gateway.log does not hold both starts:\n%s", log)
	}

	// Delete removes the agent dir and the member dir that holds its home.
	pid := gatewayPID(t, f, a)
	if err := f.rt.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	for _, p := range []string{f.rt.AgentDir(keyOf(a)), m.Dir} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s survived Delete: %v", p, err)
		}
	}
}

// Only new agents that need no environment claim: one with attached secrets, one asked to be
// stopped and one with a home already start cold. No pool, or an empty one: cold as before.
func TestPoolOnlyForNewAgents(t *testing.T) {
	f := newPoolFixture(t)
	if o := ensure(t, f, newAgent("nopool"), desired("tok-nopool-0000000000")); o.Phase != runtime.PhaseStarting || o.ClaimedFrom != "" {
		t.Fatalf("without a pool: %+v", o)
	}
	setPool(t, f, 1)
	waitPool(t, f, readyN(1))
	withEnv := desired("tok-env-000000000000")
	withEnv.Env = map[string]string{"OPENAI_API_KEY": "sk-123456"}
	stopped := desired("tok-stopped-00000000")
	stopped.Stopped = true
	for name, d := range map[string]runtime.Desired{"with-env": withEnv, "stopped": stopped} {
		if o := ensure(t, f, newAgent(name), d); o.ClaimedFrom != "" {
			t.Fatalf("%s claimed a member: %+v", name, o)
		}
	}
	// The stopped agent has a home now: started later, it starts cold in it.
	stopped.Stopped = false
	if o := ensure(t, f, newAgent("stopped"), stopped); o.ClaimedFrom != "" || o.Phase != runtime.PhaseStarting {
		t.Fatalf("a stopped agent that starts: %+v", o)
	}
	if s := f.rt.PoolStatus(poolName); s.Claimed != 0 || s.Ready != 1 {
		t.Fatalf("pool after agents that may not claim: %+v", s)
	}
	// Another engine version has no pool.
	if err := f.rt.SetPool(context.Background(), "other", runtime.PoolSpec{Version: "0.0.0", Size: 1}); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("SetPool of a version not installed: %v", err)
	}
	// An emptied pool stops its member and keeps its counters.
	ms := local.PoolMembers(f.rt, poolName)
	setPool(t, f, 0)
	waitPool(t, f, readyN(0))
	waitGone(t, ms[0].PID)
	if o := ensure(t, f, newAgent("after-empty"), desired("tok-empty-0000000000")); o.ClaimedFrom != "" {
		t.Fatalf("claimed from an empty pool: %+v", o)
	}
	f.rt.RemovePool(poolName)
	if s := f.rt.PoolStatus(poolName); s.Size != 0 || s.Version != "" || s.Claims != nil {
		t.Fatalf("a removed pool reports %+v", s)
	}
}

// 20 new agents at once against a pool of 5: exactly 5 claim a member, 15 start cold, and no
// gateway or home is shared.
func TestPoolConcurrentClaims(t *testing.T) {
	engineDir, memberEnv := switchableEngine(t)
	f := newPoolFixture(t, func(o *local.Options) { o.EngineDirs[version] = engineDir })
	setPool(t, f, 5)
	waitPool(t, f, readyN(5))
	// Refills boot slowly from here on: no member becomes ready during the burst.
	if err := os.WriteFile(memberEnv, []byte("export FAKECLAW_BOOT_DELAY=60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 20
	agents, obs := make([]string, n), make([]runtime.Observed, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		agents[i] = "burst-" + itoa(i)
		wg.Go(func() {
			<-start
			o, err := f.rt.Ensure(context.Background(), newAgent(agents[i]), desired("tok-burst-"+itoa(i)+"-0123456789"))
			if err != nil {
				t.Errorf("Ensure %d: %v", i, err)
			}
			obs[i] = o
		})
	}
	close(start)
	wg.Wait()
	claimed, members := 0, map[string]bool{}
	for i, o := range obs {
		if o.ClaimedFrom != "" {
			claimed++
			if members[o.ClaimedFrom] {
				t.Fatalf("member %s handed out twice", o.ClaimedFrom)
			}
			members[o.ClaimedFrom] = true
		} else if o.Phase != runtime.PhaseStarting {
			t.Fatalf("agent %d: %+v", i, o)
		}
	}
	if claimed != 5 {
		t.Fatalf("%d agents claimed a member, want 5", claimed)
	}
	pids, homes := map[int]string{}, map[string]string{}
	for _, name := range agents {
		a := newAgent(name)
		waitPhase(t, f, a, desired("tok-"+name), runtime.PhaseRunning)
		pid := gatewayPID(t, f, a)
		home := agentHome(t, f, a)
		if other, dup := pids[pid]; dup {
			t.Fatalf("%s and %s share pid %d", name, other, pid)
		}
		if other, dup := homes[home]; dup {
			t.Fatalf("%s and %s share home %s", name, other, home)
		}
		pids[pid], homes[home] = name, name
	}
	if s := f.rt.PoolStatus(poolName); s.Claimed != 5 || s.Booting != 5 || s.Ready != 0 {
		t.Fatalf("pool after the burst: %+v", s)
	}
}

// A member that crashes before it is claimed is discarded and replaced, and never handed out;
// members that keep failing are restarted with a backoff.
func TestPoolCrashedMemberIsReplaced(t *testing.T) {
	engineDir, memberEnv := switchableEngine(t)
	f := newPoolFixture(t, func(o *local.Options) { o.EngineDirs[version] = engineDir })
	setPool(t, f, 1)
	waitPool(t, f, readyN(1))
	dead := local.PoolMembers(f.rt, poolName)[0]
	if err := syscallKill(dead.PID); err != nil {
		t.Fatal(err)
	}
	// Right away (the supervisor may not have noticed yet): the dead member is not bound.
	a := newAgent("after-crash")
	d := desired("tok-after-crash-000000")
	if o := ensure(t, f, a, d); o.ClaimedFrom != "" {
		t.Fatalf("the dead member was handed out: %+v", o)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	if home := agentHome(t, f, a); home != filepath.Join(f.rt.AgentDir(keyOf(a)), "home") {
		t.Fatalf("the agent has home %s", home)
	}
	s := waitPool(t, f, readyN(1))
	if m := local.PoolMembers(f.rt, poolName)[0]; m.ID == dead.ID || m.PID == dead.PID {
		t.Fatalf("not replaced: %+v", m)
	}
	if _, err := os.Stat(dead.Dir); !os.IsNotExist(err) {
		t.Fatalf("the dead member's dir is left: %v", err)
	}
	if s.Failures != 0 {
		t.Fatalf("failures not reset by a healthy member: %+v", s)
	}

	// Members that fail at once: discarded, retried after a growing backoff, reported.
	if err := os.WriteFile(memberEnv, []byte("export FAKECLAW_FAIL_START=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setPool(t, f, 2) // one more member, which fails
	s = waitPool(t, f, func(s runtime.PoolStatus) bool { return s.Failures >= 3 })
	if !strings.Contains(s.LastFailure, "exited with exit code 1") || !strings.Contains(s.LastFailure, "FAKECLAW_FAIL_START") || s.Ready != 1 {
		t.Fatalf("failing members: %+v", s)
	}
	// Each failure waits out a longer backoff than the last, up to the maximum (200 ms, 400 ms,
	// then 800 ms): the next member starts only at RetryAt, so the RetryAt its failure sets is
	// at least its backoff after the last one. Without a backoff they would be a moment apart.
	retryAt := map[int32]time.Time{}
	waitPool(t, f, func(s runtime.PoolStatus) bool {
		if _, ok := retryAt[s.Failures]; !ok && !s.RetryAt.IsZero() {
			retryAt[s.Failures] = s.RetryAt
		}
		return s.Failures >= 7
	})
	b, pairs := f.opts.RestartBackoff, 0
	for n, at := range retryAt {
		next, ok := retryAt[n+1]
		if !ok {
			continue
		}
		pairs++
		if want := min(b.Initial<<n, b.Max); next.Sub(at) < want {
			t.Errorf("failure %d retried %s after failure %d's retry; its backoff is %s", n+1, next.Sub(at), n, want)
		}
	}
	if pairs < 3 {
		t.Fatalf("saw %d pairs of successive failures (%v); want at least 3", pairs, retryAt)
	}
	if err := os.Remove(memberEnv); err != nil {
		t.Fatal(err)
	}
	waitPool(t, f, func(s runtime.PoolStatus) bool { return s.Ready == 2 && s.Failures == 0 && s.LastFailure == "" })
}

// A member whose bind fails is stopped and discarded, and the agent starts cold.
func TestPoolBindFailureStartsCold(t *testing.T) {
	f := newPoolFixture(t)
	var faulted []string
	local.SetBindFault(f.rt, func(member string) error {
		faulted = append(faulted, member)
		return errors.New("injected bind failure")
	})
	setPool(t, f, 1)
	waitPool(t, f, readyN(1))
	m := local.PoolMembers(f.rt, poolName)[0]
	a := newAgent("unbound")
	d := desired("tok-unbound-000000000")
	o := ensure(t, f, a, d)
	if o.ClaimedFrom != "" || o.Phase != runtime.PhaseStarting || len(faulted) != 1 || faulted[0] != m.ID {
		t.Fatalf("Ensure with a failing bind = %+v (faulted %v)", o, faulted)
	}
	waitGone(t, m.PID)
	o = waitPhase(t, f, a, d, runtime.PhaseRunning)
	if pid := gatewayPID(t, f, a); pid == m.PID || agentHome(t, f, a) != filepath.Join(f.rt.AgentDir(keyOf(a)), "home") {
		t.Fatalf("the agent did not start cold: pid %d", pid)
	}
	waitStatus(t, o.Endpoint, d.GatewayToken, 404)
	if s := waitPool(t, f, readyN(1)); s.Claimed != 0 {
		t.Fatalf("pool after a failed bind: %+v", s)
	}
	if _, err := os.Stat(m.Dir); !os.IsNotExist(err) {
		t.Fatalf("the member's dir is left: %v", err)
	}
}

// agentHome is the home the agent's Exec runs in (its workspace's grandparent).
func agentHome(t *testing.T, f *fixture, a *agentsv1.Agent) string {
	t.Helper()
	res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"pwd"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec pwd: %+v %v", res, err)
	}
	return filepath.Dir(filepath.Dir(strings.TrimSpace(string(res.Stdout))))
}

func itoa(i int) string { return strconv.Itoa(i) }
