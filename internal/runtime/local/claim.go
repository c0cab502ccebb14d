package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentplane/agentplane/internal/engine"
	"github.com/agentplane/agentplane/internal/runtime"
)

// Binding a warm gateway: how often the agent's token is tried while the engine reloads its
// config, and how many tries may be in flight (OpenClaw answers a refused token after up to a
// second, so tries overlap).
const (
	bindPoll        = 25 * time.Millisecond
	bindMaxInflight = 16
)

// claimLocked gives a new agent a ready warm gateway of its engine version instead of a cold
// start, and reports whether it did. A new agent is one with no state and no home on disk that
// is not to be stopped and needs no environment of its own (Desired.Env: attached secrets and
// channel tokens reach a gateway only through a restart, so such an agent starts cold).
//
// The member leaves its pool (takeMember) before anything else; then the agent's initial
// config (identity and gateway token) is written over the member's, which the engine applies
// without a restart, and the claim waits until the gateway serves the agent's token. Only then
// does the agent take over the process, port and home (state.json records the home), so a
// manager that dies mid-way leaves a member that no agent references and that the next
// manager removes. A member that fails to bind is discarded and the agent starts cold.
func (a *agent) claimLocked(ctx context.Context, d runtime.Desired, engineDir string) (runtime.Observed, bool) {
	if d.Stopped || len(d.Env) > 0 || a.proc != nil || a.st != (state{}) {
		return runtime.Observed{}, false
	}
	if _, err := os.Lstat(filepath.Join(a.dir, homeDirName)); !errors.Is(err, fs.ErrNotExist) {
		return runtime.Observed{}, false
	}
	start := time.Now()
	m := a.rt.takeMember(d.EngineVersion, engineDir)
	if m == nil {
		return runtime.Observed{}, false
	}
	if err := a.bindLocked(ctx, m, d); err != nil {
		a.log.Info("a warm gateway could not be bound: it is discarded and the agent starts cold",
			"pool", m.pool.name, "member", m.id, "error", err.Error())
		a.rt.bindFailed(m, err)
		return runtime.Observed{}, false
	}
	took := time.Since(start)
	a.st = state{
		Port: m.port, PID: m.proc.pid, StartTime: m.proc.start,
		EngineVersion: d.EngineVersion, EngineDir: engineDir, ConfigHash: d.ConfigHash, RestartNonce: d.RestartNonce,
		TokenHash: tokenHash(d.GatewayToken), Home: m.home,
	}
	a.home, a.loaded, a.prepared = m.home, true, true
	a.env, a.token = nil, d.GatewayToken
	a.proc, a.unhealthy, a.backoff, a.retryAt = m.proc, 0, 0, timeZero
	a.proc.healthySince = time.Now()
	a.rt.transferPort(m, a.key)
	// The member's log goes on growing where the gateway writes it; the agent dir gets the
	// same file (a hard link: one inode, rotated and tailed as the agent's own).
	logPath := filepath.Join(a.dir, logFileName)
	_ = os.Remove(logPath)
	if err := os.Link(filepath.Join(m.dir, logFileName), logPath); err != nil {
		a.log.Error(err, "cannot link the warm gateway's log into the agent dir")
	}
	a.saveLocked()
	a.setPhase(runtime.PhaseRunning, "", "")
	a.rt.recordClaim(m, a.key, took)
	a.log.Info("claimed a warm gateway", "pool", m.pool.name, "member", m.id, "pid", m.proc.pid, "port", m.port, "took", took.Round(time.Millisecond))
	a.poke()
	o := a.observedLocked()
	o.ClaimedFrom = m.pool.name + "/" + m.id
	return o, true
}

// bindLocked writes the agent's initial config over the member's and waits until the gateway
// serves the agent's token.
func (a *agent) bindLocked(ctx context.Context, m *member, d runtime.Desired) error {
	r := a.rt
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return err
	}
	if r.bindFault != nil {
		if err := r.bindFault(m.id); err != nil {
			return err
		}
	}
	e := r.opts.Engine
	cfg, err := e.InitialConfig(engine.Identity(d.Identity), d.GatewayToken)
	if err != nil {
		return fmt.Errorf("initial engine config: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(m.home, e.Layout().ConfigPath), cfg, 0o600); err != nil {
		return fmt.Errorf("write engine config: %w", err)
	}
	return r.waitBound(ctx, m, d.GatewayToken)
}

var errTokenRefused = errors.New("the gateway refuses the agent's token")

// waitBound tries the token on m's gateway every bindPoll (several tries in flight) until it is
// accepted, the gateway exits or BindTimeout passes. An engine that cannot check tokens
// (engine.TokenChecker) only has its health checked.
func (r *Runtime) waitBound(ctx context.Context, m *member, token string) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.BindTimeout)
	defer cancel()
	url := endpoint(m.port)
	check := func() error {
		tc, ok := r.opts.Engine.(engine.TokenChecker)
		if !ok {
			return r.opts.Engine.Healthy(ctx, url)
		}
		accepted, err := tc.TokenAccepted(ctx, url, token)
		if err == nil && !accepted {
			err = errTokenRefused
		}
		return err
	}
	results := make(chan error, bindMaxInflight) // never blocks a try: at most that many run
	inflight := 0
	launch := func() {
		inflight++
		go func() { results <- check() }()
	}
	tick := time.NewTicker(bindPoll)
	defer tick.Stop()
	last := errors.New("no answer")
	launch()
	for {
		select {
		case err := <-results:
			inflight--
			if err == nil {
				return nil
			}
			last = err
		case <-tick.C:
			if inflight < bindMaxInflight {
				launch()
			}
		case <-m.proc.exited:
			return fmt.Errorf("the gateway exited with %s", m.proc.exitDesc)
		case <-ctx.Done():
			return fmt.Errorf("the gateway did not serve the agent's token within %s: %w", r.opts.BindTimeout, last)
		}
	}
}

// takeMember takes the longest-ready member of a pool of the version out of its pool (nil:
// no pool has one). From here on the member belongs to the caller alone.
func (r *Runtime) takeMember(version, engineDir string) *member {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if r.poolsClosed {
		return nil
	}
	names := make([]string, 0, len(r.pools))
	for n := range r.pools {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := r.pools[n]
		if p.removed || p.version != version || p.engineDir != engineDir {
			continue
		}
		var best *member
		for _, m := range p.members {
			if m.ready && !m.proc.hasExited() && (best == nil || m.readyAt.Before(best.readyAt)) {
				best = m
			}
		}
		if best == nil {
			continue
		}
		delete(p.members, best.id)
		best.gone = true
		close(best.quit)
		p.poke() // refill
		return best
	}
	return nil
}

// transferPort hands the member's port reservation to the agent.
func (r *Runtime) transferPort(m *member, to types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releasePortsLocked(memberKey(m.id))
	r.releasePortsLocked(to)
	r.ports[m.port] = to
}

// bindFailed discards a claimed member whose bind failed.
func (r *Runtime) bindFailed(m *member, err error) {
	r.poolMu.Lock()
	m.pool.lastFail = "a claimed gateway failed to bind and was discarded: " + err.Error()
	r.discardLocked(m)
	r.poolMu.Unlock()
	r.notifyPool(m.pool.name)
}

// recordClaim counts a claim of m's pool.
func (r *Runtime) recordClaim(m *member, agent types.NamespacedName, took time.Duration) {
	r.poolMu.Lock()
	p := m.pool
	p.claimed++
	p.claims = append(p.claims, runtime.PoolClaim{Seq: p.claimed, Member: m.id, Agent: agent, At: time.Now(), Latency: took})
	if n := len(p.claims) - runtime.PoolClaimsKept; n > 0 {
		p.claims = slices.Delete(p.claims, 0, n)
	}
	r.poolMu.Unlock()
	r.notifyPool(p.name)
}
