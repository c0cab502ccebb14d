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

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Binding a warm gateway: how often its tokens are tried while the engine reloads its config,
// how long a try of the member's old token may take before the agent's is tried, and how many
// tries of the agent's token may wait at once (refused ones wait up to 5 s: a low bound would
// keep the accepted one from being sent).
const (
	bindPoll        = 20 * time.Millisecond
	bindSuspect     = 40 * time.Millisecond
	bindMaxInflight = 64
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
//
// A gateway reserved for the agent (ReserveGateway, reserve.go) is taken instead of a member of
// a pool: its token is the agent's already, so there is no reload to wait for (adoptLocked).
func (a *agent) claimLocked(ctx context.Context, d runtime.Desired, engineDir string) (runtime.Observed, bool) {
	start := time.Now()
	if res := a.rt.takeReservation(a.key); res != nil {
		return a.claimReservedLocked(ctx, res, d, engineDir, start)
	}
	if d.Stopped || len(d.Env) > 0 || !a.freshLocked() {
		return runtime.Observed{}, false
	}
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
	return a.takeOverLocked(m, d, engineDir, time.Since(start)), true
}

// freshLocked tells whether the agent has never run here: no process, no state, no home.
func (a *agent) freshLocked() bool {
	if a.proc != nil || a.st != (state{}) {
		return false
	}
	_, err := os.Lstat(filepath.Join(a.dir, homeDirName))
	return errors.Is(err, fs.ErrNotExist)
}

// takeOverLocked makes the bound member m the agent's gateway: state.json records its home,
// the agent takes its process and port and links its log, and the claim is counted.
func (a *agent) takeOverLocked(m *member, d runtime.Desired, engineDir string, took time.Duration) runtime.Observed {
	a.st = state{
		Port: m.port, PID: m.proc.pid, StartTime: m.proc.start,
		EngineVersion: d.EngineVersion, EngineDir: engineDir, ConfigHash: a.rt.configHash(d), RestartNonce: d.RestartNonce,
		TokenHash: tokenHash(d.GatewayToken), Home: m.home, Template: m.template,
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
	return o
}

// bindLocked writes the agent's initial config over the member's and waits until the gateway
// serves the agent's token.
func (a *agent) bindLocked(ctx context.Context, m *member, d runtime.Desired) error {
	if err := a.writeAgentConfigLocked(m.home, d); err != nil {
		return err
	}
	return a.rt.waitBound(ctx, m, d.GatewayToken)
}

// writeAgentConfigLocked makes the agent dir and writes the agent's initial engine config
// (identity and gateway token) in home, over a warm gateway's or a template copy's.
func (a *agent) writeAgentConfigLocked(home string, d runtime.Desired) error {
	r := a.rt
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return err
	}
	if r.bindFault != nil {
		if err := r.bindFault(filepath.Base(filepath.Dir(home))); err != nil {
			return err
		}
	}
	e := r.opts.Engine
	cfg, err := e.InitialConfig(d.Identity, d.GatewayToken)
	if err != nil {
		return fmt.Errorf("initial engine config: %w", err)
	}
	if err := r.writeOwned(home, filepath.Clean(e.Layout().ConfigPath), cfg, 0o600); err != nil {
		return fmt.Errorf("write engine config: %w", err)
	}
	return nil
}

var errTokenRefused = errors.New("the gateway refuses the agent's token")

// waitBound waits until m's gateway serves the agent's token (the engine hot-reloads the
// config written over the member's), the gateway exits or BindTimeout passes. An engine that
// cannot check tokens (engine.TokenChecker) only has its health checked.
//
// OpenClaw answers a refused token late: 250 ms after the first refusal from an address,
// doubling with each further one up to 5 s, and every waiting refusal waits for the latest
// deadline; an accepted token is answered at once. So the member's own token is tried first,
// one try at a time: it works until the reload applies, and answers fast. Once a try of it is
// refused, or takes longer than bindSuspect (refused, or the gateway is busy applying the
// reload), the agent's token is tried every bindPoll, several tries overlapping, until one is
// accepted: the bind is seen a poll after the reload applied, and the refused tries left
// waiting are cancelled. (Trying the agent's token from the start piled up those delays: binds
// took 5 s.)
func (r *Runtime) waitBound(ctx context.Context, m *member, token string) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.BindTimeout)
	defer cancel()
	url := endpoint(m.port)
	tc, ok := r.opts.Engine.(engine.TokenChecker)
	if !ok {
		return r.opts.Engine.Healthy(ctx, url)
	}
	type answer struct {
		agent bool // the try was of the agent's token
		err   error
	}
	answers := make(chan answer, bindMaxInflight+1) // at most that many tries run: sends never block
	var (
		oldRuns   bool      // a try of the member's token runs
		oldSince  time.Time // since when
		newTries  bool      // the agent's token is being tried
		newFlying int       // tries of the agent's token running
	)
	try := func(agent bool) {
		tok := m.token
		if agent {
			tok, newFlying = token, newFlying+1
		} else {
			oldRuns, oldSince = true, time.Now()
		}
		go func() {
			accepted, err := tc.TokenAccepted(ctx, url, tok)
			if err == nil && !accepted {
				err = errTokenRefused
			}
			answers <- answer{agent, err}
		}()
	}
	tick := time.NewTicker(bindPoll)
	defer tick.Stop()
	last := errors.New("no answer")
	try(false)
	for {
		select {
		case a := <-answers:
			if a.agent {
				newFlying--
				if a.err == nil {
					return nil
				}
				last = a.err
				continue
			}
			oldRuns = false
			if errors.Is(a.err, errTokenRefused) && !newTries {
				newTries = true // the reload applied
				try(true)
			}
		case <-tick.C:
			switch {
			case newTries:
				if newFlying < bindMaxInflight {
					try(true)
				}
			case oldRuns && time.Since(oldSince) > bindSuspect:
				newTries = true // refused (its answer is late), or the reload is being applied
				try(true)
			case !oldRuns:
				try(false)
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
	return r.takeMemberLocked(version, engineDir)
}

func (r *Runtime) takeMemberLocked(version, engineDir string) *member {
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
		// The refill starts once the claim is over (recordClaim, bindFailed, or a
		// reservation's discard): a booting gateway takes the CPU the bind needs.
		delete(p.members, best.id)
		best.gone = true
		close(best.quit)
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
	m.pool.poke()
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
	p.poke() // refill
	r.poolMu.Unlock()
	r.notifyPool(p.name)
}
