package local_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// reserveFixture is a pool fixture whose members apply a new config token only after an hour
// (FAKECLAW_RELOAD_DELAY: the engine's hot reload, made slow), with a short bind timeout: a
// claim that waits for a reload fails, one that needs none succeeds.
func reserveFixture(t *testing.T, size int, mutate ...func(*local.Options)) (*fixture, string) {
	t.Helper()
	engineDir, memberEnv := switchableEngine(t)
	if err := os.WriteFile(memberEnv, []byte("export FAKECLAW_RELOAD_DELAY=1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newPoolFixture(t, append([]func(*local.Options){func(o *local.Options) {
		o.EngineDirs[version] = engineDir
		o.BindTimeout = 500 * time.Millisecond
	}}, mutate...)...)
	setPool(t, f, size)
	waitPool(t, f, readyN(size))
	return f, memberEnv
}

// reserve calls ReserveGateway and fails the test on error.
func reserve(t *testing.T, f *fixture, name string) (string, bool) {
	t.Helper()
	tok, ok, err := f.rt.ReserveGateway(context.Background(), newAgent(name), version)
	if err != nil {
		t.Fatalf("ReserveGateway(%s): %v", name, err)
	}
	return tok, ok
}

// memberWithToken is the member of ms whose config holds tok.
func memberWithToken(t *testing.T, ms []local.PoolMember, tok string) local.PoolMember {
	t.Helper()
	for _, m := range ms {
		if memberToken(t, m.Home) == tok {
			return m
		}
	}
	t.Fatalf("no member has the reserved token")
	return local.PoolMember{}
}

// A reserved gateway's token becomes the agent's: the first Ensure claims it without waiting
// for a reload (the double would not apply a new token for an hour), while a claim without a
// reservation waits for the reload, fails to bind and starts cold.
func TestPoolReserveAdoptsToken(t *testing.T) {
	f, _ := reserveFixture(t, 2)
	before := local.PoolMembers(f.rt, poolName)
	a := newAgent("reserved")
	tok, ok := reserve(t, f, a.Name)
	if !ok {
		t.Fatal("no reservation from a ready pool")
	}
	m := memberWithToken(t, before, tok)
	if again, ok := reserve(t, f, a.Name); !ok || again != tok {
		t.Fatalf("ReserveGateway again = %v, want the same reservation", ok)
	}
	if s := f.rt.PoolStatus(poolName); s.Ready != 1 || s.Claimed != 0 {
		t.Fatalf("pool with a reserved member: %+v, want 1 ready", s)
	}

	d := desired(tok)
	o := ensure(t, f, a, d)
	if o.Phase != runtime.PhaseRunning || o.ClaimedFrom != poolName+"/"+m.ID || gatewayPID(t, f, a) != m.PID {
		t.Fatalf("first Ensure with a reservation = %+v, want Running on member %s", o, m.ID)
	}
	if code := invoke(t, o.Endpoint, tok); code != 404 {
		t.Fatalf("the claimed gateway answers the agent's token with %d, want 404 at once", code)
	}
	cfg, _ := os.ReadFile(filepath.Join(m.Home, ".openclaw", "openclaw.json"))
	if !strings.Contains(string(cfg), "Tester") {
		t.Fatalf("the agent's identity is not in the config:\n%s", cfg)
	}
	if _, ok := reserve(t, f, a.Name); ok {
		t.Fatal("an agent that runs got a reservation")
	}

	// Without a reservation the other member must reload the agent's token: it does not
	// within BindTimeout, so it is discarded and the agent starts cold.
	b := newAgent("unreserved")
	db := desired("tok-unreserved-0123456789")
	if o := ensure(t, f, b, db); o.ClaimedFrom != "" {
		t.Fatalf("a claim that needs a reload bound: %+v", o)
	}
	ob := waitPhase(t, f, b, db, runtime.PhaseRunning)
	waitStatus(t, ob.Endpoint, db.GatewayToken, 404)

	// The member that failed to bind is gone (its failure is in LastFailure only until a new
	// member is healthy, which the refill below makes happen).
	s := waitPool(t, f, readyN(2))
	if s.Claimed != 1 || s.Claims[0].Agent != keyOf(a) || s.Claims[0].Member != m.ID {
		t.Fatalf("pool after a reserved claim and a failed bind: %+v", s)
	}
	for _, other := range before {
		if other.ID == m.ID {
			continue
		}
		if slices.ContainsFunc(local.PoolMembers(f.rt, poolName), func(x local.PoolMember) bool { return x.ID == other.ID }) ||
			gatewayPID(t, f, b) == other.PID {
			t.Fatalf("the member that failed to bind (%s) was not discarded", other.ID)
		}
	}
}

// A reservation its agent cannot use is discarded: the gateway is stopped and removed, never
// handed to another agent, and the pool refills.
func TestPoolReservationDiscarded(t *testing.T) {
	withEnv := func(d *runtime.Desired) { d.Env = map[string]string{"OPENAI_API_KEY": "sk-123456"} }
	cases := []struct {
		name string
		// then does what discards the reservation of agent "a" holding tok.
		then func(t *testing.T, f *fixture, tok string)
	}{
		{"env", func(t *testing.T, f *fixture, tok string) { ensureCold(t, f, tok, withEnv) }},
		{"stopped", func(t *testing.T, f *fixture, tok string) {
			ensureCold(t, f, tok, func(d *runtime.Desired) { d.Stopped = true })
		}},
		{"token differs", func(t *testing.T, f *fixture, _ string) {
			ensureCold(t, f, "tok-another-0123456789", nil)
		}},
		{"delete", func(t *testing.T, f *fixture, _ string) {
			if err := f.rt.Delete(context.Background(), newAgent("a")); err != nil {
				t.Fatal(err)
			}
		}},
		{"expiry", func(t *testing.T, f *fixture, _ string) {}}, // ReservationTimeout passes
		{"shutdown", func(t *testing.T, f *fixture, _ string) {
			if err := f.rt.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			timeout := time.Hour
			if c.name == "expiry" {
				timeout = 300 * time.Millisecond
			}
			f, _ := reserveFixture(t, 1, func(o *local.Options) { o.ReservationTimeout = timeout })
			ms := local.PoolMembers(f.rt, poolName)
			tok, ok := reserve(t, f, "a")
			if !ok {
				t.Fatal("no reservation")
			}
			m := memberWithToken(t, ms, tok)
			c.then(t, f, tok)
			waitGone(t, m.PID)
			waitRemoved(t, m.Dir)
			if c.name == "shutdown" {
				return
			}
			waitPool(t, f, readyN(1))
			if n := local.PoolDiscarded(f.rt, poolName); n != 1 {
				t.Fatalf("%d reservations discarded, want 1", n)
			}
			// The next agent gets the new member, never the discarded one.
			other := newAgent("other")
			otok, ok := reserve(t, f, other.Name)
			if !ok || otok == tok {
				t.Fatalf("the next reservation: %v (same token: %v)", ok, otok == tok)
			}
			o := ensure(t, f, other, desired(otok))
			if o.ClaimedFrom == "" || o.ClaimedFrom == poolName+"/"+m.ID || gatewayPID(t, f, other) == m.PID {
				t.Fatalf("the next agent: %+v", o)
			}
		})
	}
}

// ensureCold ensures agent "a" with token tok (changed by mutate) and checks that it did not
// claim a gateway.
func ensureCold(t *testing.T, f *fixture, tok string, mutate func(*runtime.Desired)) {
	t.Helper()
	d := desired(tok)
	if mutate != nil {
		mutate(&d)
	}
	if o := ensure(t, f, newAgent("a"), d); o.ClaimedFrom != "" {
		t.Fatalf("Ensure claimed a reservation it cannot use: %+v", o)
	}
}

// waitRemoved waits until path no longer exists.
func waitRemoved(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(eventBound)
	for {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not removed", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// 20 new agents reserve and ensure at once against a pool of 5: exactly 5 get a reservation
// and claim it, 15 start cold with tokens of their own, and no member serves two agents.
func TestPoolConcurrentReservations(t *testing.T) {
	f, memberEnv := reserveFixture(t, 5)
	// Refills boot slowly from here on: no member becomes ready during the burst.
	if err := os.WriteFile(memberEnv, []byte("export FAKECLAW_RELOAD_DELAY=1h FAKECLAW_BOOT_DELAY=60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 20
	names, toks := make([]string, n), make([]string, n)
	reserved, obs := make([]bool, n), make([]runtime.Observed, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		names[i] = "burst-" + itoa(i)
		wg.Go(func() {
			<-start
			a := newAgent(names[i])
			tok, ok, err := f.rt.ReserveGateway(context.Background(), a, version)
			if err != nil {
				t.Errorf("ReserveGateway %d: %v", i, err)
			}
			if !ok {
				tok = "tok-" + names[i] + "-0123456789"
			}
			toks[i], reserved[i] = tok, ok
			if obs[i], err = f.rt.Ensure(context.Background(), a, desired(tok)); err != nil {
				t.Errorf("Ensure %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	claimed, members, tokens := 0, map[string]bool{}, map[string]bool{}
	for i, o := range obs {
		if reserved[i] != (o.ClaimedFrom != "") {
			t.Fatalf("agent %d: reserved %v but %+v", i, reserved[i], o)
		}
		if tokens[toks[i]] {
			t.Fatalf("token of agent %d handed out twice", i)
		}
		tokens[toks[i]] = true
		if o.ClaimedFrom == "" {
			continue
		}
		claimed++
		if members[o.ClaimedFrom] {
			t.Fatalf("member %s handed out twice", o.ClaimedFrom)
		}
		members[o.ClaimedFrom] = true
	}
	if claimed != 5 {
		t.Fatalf("%d agents claimed a member, want 5", claimed)
	}
	pids, homes := map[int]string{}, map[string]string{}
	for i, name := range names {
		a := newAgent(name)
		o := waitPhase(t, f, a, desired(toks[i]), runtime.PhaseRunning)
		waitStatus(t, o.Endpoint, toks[i], 404)
		pid, home := gatewayPID(t, f, a), agentHome(t, f, a)
		if other, dup := pids[pid]; dup {
			t.Fatalf("%s and %s share pid %d", name, other, pid)
		}
		if other, dup := homes[home]; dup {
			t.Fatalf("%s and %s share home %s", name, other, home)
		}
		pids[pid], homes[home] = name, name
	}
	if s := f.rt.PoolStatus(poolName); s.Claimed != 5 || s.Ready != 0 {
		t.Fatalf("pool after the burst: %+v", s)
	}
}
