package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// startMember makes a member's dir and home, writes the engine's initial config with a random
// token and no identity, and starts its gateway on a port of its own. When its engine's template is ready (templates.go) the member is a copy of it instead
// (startMemberCopy), and boots when the copy fails.
func (r *Runtime) startMember(p *pool, version, engineDir string) (*member, error) {
	if t, _ := r.template(version, engineDir); t != nil {
		m, err := r.startMemberCopy(p, version, t)
		if err == nil {
			return m, nil
		}
		r.opts.Log.Info("a warm gateway could not be born from its engine's template: it boots", "pool", p.name, "error", err.Error())
	}
	m, err := r.newMember(p)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*member, error) {
		r.destroyMember(m)
		return nil, err
	}
	e := r.opts.Engine
	if err := r.freshHome(m.home, m.token); err != nil {
		return fail(err)
	}
	if m.port, err = r.allocatePort(memberKey(m.id), 0); err != nil {
		return fail(err)
	}
	r.engineVersion(context.Background(), engineDir, m.home, version) // cached for the agents' Observed
	gc := e.GatewayCommand(engine.GatewayParams{Port: m.port, Bind: "loopback"})
	env := mergeEnv(baseEnv(engineDir), r.nodeEnv(), r.egressEnv(), e.Env(m.home, m.port), gc.Env, map[string]string{MarkerEnv: m.home})
	helper, err := r.gatewayHelper(m.home)
	if err != nil {
		return fail(err)
	}
	bin, args, err := r.inSandbox(sandboxSpec{home: m.home, dir: m.home, binary: engineBinary(engineDir), args: gc.Args, net: helper}, engineDir, true)
	if err != nil {
		return fail(err)
	}
	if m.proc, err = startProcess(launch{binary: bin, args: args, env: env, dir: m.home, logPath: filepath.Join(m.dir, logFileName), sandboxed: r.sbx != nil,
		merge: r.opts.MemoryMerge}); err != nil {
		return fail(err)
	}
	if err := r.attach(m.proc, m.port, m.port, m.home); err != nil {
		stopProcess(context.Background(), m.proc, 0, nil)
		return fail(err)
	}
	r.opts.Log.Info("warm gateway started", "pool", p.name, "member", m.id, "pid", m.proc.pid, "port", m.port)
	return m, nil
}

// newMember makes a new member's dir and home (attached), with a random token.
func (r *Runtime) newMember(p *pool) (*member, error) {
	id := p.name + "-" + randomHex(4)
	dir := filepath.Join(r.opts.StateDir, poolDirName, id)
	m := &member{pool: p, id: id, dir: dir, home: filepath.Join(dir, homeDirName), token: randomHex(24), quit: make(chan struct{})}
	if err := os.MkdirAll(filepath.Join(r.opts.StateDir, poolDirName), 0o700); err != nil {
		return nil, err
	}
	err := os.MkdirAll(dir, 0o700)
	if err == nil {
		err = r.attachHome(m.home)
	}
	if err != nil {
		r.destroyMember(m)
		return nil, err
	}
	return m, nil
}

// startMemberCopy makes a member whose gateway is a copy of template t, restarting on the
// engine's initial config with the member's token and no identity; its supervisor sees it
// ready once it serves that token, as a booted member.
func (r *Runtime) startMemberCopy(p *pool, version string, t *templateMeta) (*member, error) {
	m, err := r.newMember(p)
	if err != nil {
		return nil, err
	}
	e := r.opts.Engine
	proc, port, err := r.restoreCopy(r.ccCtx, t, copyTarget{dir: m.dir, home: m.home, owner: memberKey(m.id), writeConfig: func() error {
		cfg, err := e.InitialConfig(engine.Identity{}, m.token)
		if err != nil {
			return fmt.Errorf("initial engine config: %w", err)
		}
		return r.writeOwned(m.home, filepath.Clean(e.Layout().ConfigPath), cfg, 0o600)
	}})
	m.proc = proc
	if err != nil {
		r.destroyMember(m)
		return nil, err
	}
	m.port, m.template, m.rebirth = port, t.Key, &rebirth{oldToken: t.Token}
	r.engineVersion(context.Background(), t.EngineDir, m.home, version) // cached for the agents' Observed
	r.opts.Log.Info("warm gateway born from its engine's template", "pool", p.name, "member", m.id, "pid", proc.pid, "port", port)
	return m, nil
}

// freshHome makes a home no agent has had (a warm gateway's, the compile cache's warm-up's)
// with the engine's initial config: token, no identity.
func (r *Runtime) freshHome(home, token string) error {
	l := r.opts.Engine.Layout()
	for _, d := range []string{home, filepath.Join(home, l.StateDir), filepath.Join(home, l.WorkspaceDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	cfg, err := r.opts.Engine.InitialConfig(engine.Identity{}, token)
	if err != nil {
		return fmt.Errorf("initial engine config: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(home, l.ConfigPath), cfg, 0o600); err != nil {
		return fmt.Errorf("write engine config: %w", err)
	}
	return nil
}

// superviseMember polls m's health until it is gone (claimed or discarded): HealthInterval
// while it boots, RunningHealthInterval once ready. It is ready once it is healthy and, with an
// engine that tells (engine.ReadyChecker), done with its start-up work: a claim must find a
// gateway that reloads its config at once; and, with an engine that checks tokens
// (engine.TokenChecker), once it accepted its own token: OpenClaw's first token check of a
// gateway takes 200-300 ms (the tool route is set up on first use), the reserved claim's only
// wait (adoptLocked) after that is 20-40 ms. A member that exits, does not become ready within
// StartTimeout or stops answering (unhealthyAfter checks in a row) is failed.
func (r *Runtime) superviseMember(m *member) {
	defer r.poolWG.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.quit
		cancel()
	}()
	url := endpoint(m.port)
	timer := time.NewTimer(r.opts.HealthInterval)
	defer timer.Stop()
	for {
		select {
		case <-m.quit:
			return
		case <-m.proc.exited:
			r.poolMu.Lock()
			if !m.gone {
				r.memberFailedLocked(m.pool, m, "the warm gateway exited with "+m.proc.exitDesc)
			}
			r.poolMu.Unlock()
			r.notifyPool(m.pool.name)
			return
		case <-timer.C:
		}
		r.poolMu.Lock()
		ready := m.ready
		r.poolMu.Unlock()
		err := r.memberHealth(ctx, m, url, ready)
		r.poolMu.Lock()
		if m.gone {
			r.poolMu.Unlock()
			return
		}
		changed, next := false, r.opts.HealthInterval
		switch {
		case err == nil:
			m.unhealthy, next = 0, r.opts.RunningHealthInterval
			if !m.ready {
				m.ready, m.readyAt, changed = true, time.Now(), true
				p := m.pool
				p.failures, p.backoff, p.retryAt, p.lastFail = 0, 0, time.Time{}, ""
				r.opts.Log.Info("warm gateway is ready", "pool", p.name, "member", m.id, "bootTime", time.Since(m.proc.started).Round(time.Millisecond))
			}
		case m.ready:
			m.unhealthy, next = m.unhealthy+1, r.opts.RunningHealthInterval
			if m.unhealthy >= unhealthyAfter {
				r.memberFailedLocked(m.pool, m, "the warm gateway stopped answering its health check: "+err.Error())
				changed = true
			}
		case time.Since(m.proc.started) > r.opts.StartTimeout:
			r.memberFailedLocked(m.pool, m, fmt.Sprintf("the warm gateway did not answer its health check within %s", r.opts.StartTimeout))
			changed = true
		}
		gone := m.gone
		r.poolMu.Unlock()
		if changed {
			r.notifyPool(m.pool.name)
		}
		if gone {
			return
		}
		timer.Reset(next)
	}
}

// memberHealth checks a member's health, and while it is not ready yet its readiness and
// that it accepts its own token (a copy's: once reborn, rebirth).
func (r *Runtime) memberHealth(ctx context.Context, m *member, url string, ready bool) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if ready {
		return r.opts.Engine.Healthy(ctx, url)
	}
	if m.rebirth != nil {
		return m.rebirth.check(ctx, r, url, m.token)
	}
	if err := r.ready(ctx, url); err != nil {
		return err
	}
	if tc, ok := r.opts.Engine.(engine.TokenChecker); ok {
		accepted, err := tc.TokenAccepted(ctx, url, m.token)
		if err == nil && !accepted {
			err = errors.New("the warm gateway refuses its own token")
		}
		return err
	}
	return nil
}

// ready checks a booting gateway's health and, with an engine that tells
// (engine.ReadyChecker), that it is done with its start-up work.
func (r *Runtime) ready(ctx context.Context, url string) error {
	if err := r.opts.Engine.Healthy(ctx, url); err != nil {
		return err
	}
	if rc, ok := r.opts.Engine.(engine.ReadyChecker); ok {
		return rc.Ready(ctx, url)
	}
	return nil
}

// randomHex is n random bytes, hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
