package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Files of an agent dir while its gateway is born from a template: the image rewritten for
// the agent (removed once restored), CRIU's log of the restore, and the dir of the hooks'
// FIFOs the copy runs with.
const (
	copyImageName = "template-image"
	copyWorkName  = "template-restore"
	copyRunName   = "template-run"
)

// bornFromTemplateLocked starts a copy of its engine's template as a new agent's gateway
// instead of a cold start, and reports whether it did. New as for a warm pool's claim
// (claimLocked): no state, no home, not to be stopped, no environment of its own. The copy is
// made in the background (copyInBackground), as a cold start boots in the background: Ensure
// returns at once with the agent Starting, and Ensure calls while the copy is made report that
// without waiting. When there is no copy to make, a.coldWhy says why (the cold start's status
// tells).
func (a *agent) bornFromTemplateLocked(d runtime.Desired, res *agentsv1.AgentResources, engineDir string) (runtime.Observed, bool) {
	// A runtime that makes no templates says so once, at its start (local.go), not in each
	// agent's status.
	if a.rt.templatesOff() != "" || d.Stopped || len(d.Env) > 0 || !a.freshLocked() {
		return runtime.Observed{}, false
	}
	m, why := a.rt.template(d.EngineVersion, engineDir)
	if m == nil {
		a.coldWhy = why
		return runtime.Observed{}, false
	}
	ctx, cancel := context.WithCancel(a.rt.ccCtx)
	if ctx.Err() != nil {
		cancel()
		return runtime.Observed{}, false // shutting down
	}
	a.setPhase(runtime.PhaseStarting, agentsv1.ReasonBornFromGatewayTemplate, "the gateway is being born from its engine's template")
	o := a.observedLocked()
	a.copying.Store(&o)
	a.rt.ccWG.Add(1)
	go func() {
		defer a.rt.ccWG.Done()
		defer cancel()
		go func() { // a deleted agent's copy ends at once
			select {
			case <-a.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		a.copyInBackground(ctx, m, d, res, engineDir)
	}()
	return o, true
}

// copyInBackground makes the copy bornFromTemplateLocked started, holding the agent (its
// other operations wait for the copy as for a checkpoint). A copy that fails gives the agent
// a cold start, with d, unless the agent was deleted or the runtime shuts down meanwhile; a
// desired state that changed meanwhile is the next Ensure's (the result is notified).
func (a *agent) copyInBackground(ctx context.Context, m *templateMeta, d runtime.Desired, res *agentsv1.AgentResources, engineDir string) {
	a.mu.Lock()
	defer func() {
		a.copying.Store(nil)
		notify := a.takeNotify()
		a.mu.Unlock()
		if notify {
			a.notify()
		}
	}()
	if a.closed {
		return
	}
	start := time.Now()
	restored, err := a.copyTemplateLocked(ctx, m, d)
	if err == nil {
		took := time.Since(start)
		a.log.Info("gateway born from its engine's template", "pid", a.proc.pid, "port", a.st.Port, "took", took.Round(time.Millisecond),
			"restored", restored.Round(time.Millisecond), "restartedOnItsConfig", (took - restored).Round(time.Millisecond))
		a.setPhase(runtime.PhaseRunning, agentsv1.ReasonBornFromGatewayTemplate,
			fmt.Sprintf("the gateway was born from its engine's template in %s (restored in %s, then restarted on the agent's config)",
				took.Round(time.Millisecond), restored.Round(time.Millisecond)))
		a.poke()
		return
	}
	// What the copy's gateway said first and last, before forgetCopyLocked empties its dir:
	// why it did not restart is there, not in the error.
	tail := redact(headTailLog(filepath.Join(a.dir, logFileName)), a.secretsLocked())
	a.forgetCopyLocked()
	if a.closed || ctx.Err() != nil {
		a.setPhase(runtime.PhaseStopped, "", "")
		return
	}
	a.log.Info("the gateway could not be born from its engine's template: it starts cold", "error", err.Error(), "copyLog", tail)
	a.coldWhy = "the engine's template could not be restored: " + err.Error()
	if tail != "" {
		a.coldWhy += "; the copy's log:\n" + tail
	}
	if err := a.coldLocked(context.Background(), d, res, engineDir); err != nil {
		a.crashedLocked(timeZero, agentsv1.ReasonGatewayStartFailed, "cannot start the gateway: "+err.Error())
	}
}

// copyTemplateLocked restores a copy of template m as the agent's gateway and binds it to
// the agent (its config and token, as a warm pool member's bind). It returns how long the
// copy took to be made and restored (its files, CRIU's restore, its door), before its
// gateway restarted on the agent's config.
func (a *agent) copyTemplateLocked(ctx context.Context, m *templateMeta, d runtime.Desired) (time.Duration, error) {
	r := a.rt
	start := time.Now()
	if err := a.prepareLocked(); err != nil {
		return 0, err
	}
	// The agent's config is written before the restore: the copy's gateway restarts on it
	// once it has forgotten the template's identity (planReset), and sees no change of it
	// before that (a reload of the template's gateway would race the restart).
	p, port, err := r.restoreCopy(ctx, m, copyTarget{dir: a.dir, home: a.home, owner: a.key,
		writeConfig: func() error { return a.writeAgentConfigLocked(a.home, d) }})
	if p != nil {
		a.proc = p // from here on forgetCopyLocked ends it
	}
	if err != nil {
		return 0, err
	}
	restored := time.Since(start)
	a.st = state{Port: port, PID: p.pid, StartTime: p.start, EngineVersion: m.Version, EngineDir: m.EngineDir, Template: m.Key}
	if err := r.waitReborn(ctx, p, port, m.Token, d.GatewayToken); err != nil {
		return 0, err
	}
	a.st.ConfigHash, a.st.RestartNonce, a.st.TokenHash = a.rt.configHash(d), d.RestartNonce, tokenHash(d.GatewayToken)
	a.loaded, a.prepared = true, true
	a.env, a.token = nil, d.GatewayToken
	a.unhealthy, a.backoff, a.retryAt = 0, 0, timeZero
	a.proc.healthySince = time.Now()
	a.since = time.Now()
	a.saveLocked()
	return restored, nil
}

// copyTarget is where a copy of a template goes: an agent's dir and home, or a warm pool
// member's (pool_member.go).
type copyTarget struct {
	dir, home string               // the dir of its files (copyFiles) and its home (made)
	owner     types.NamespacedName // whose port the copy's door is
	// writeConfig writes the gateway's config into home before the restore (the copy
	// restarts on it).
	writeConfig func() error
}

// restoreCopy restores a copy of template m for t: its files made (prepareCopy), the image
// restored in t's cgroup with t's home, hooks' dir and log as its mounts, thawed with the
// instance reset planned, and its door on a port of t's. It returns the copy's sandbox init
// (also on an error once it was restored: the caller ends it) and the port; the copy then
// restarts on t's config (waitReborn, or a pool member's supervisor).
func (r *Runtime) restoreCopy(ctx context.Context, m *templateMeta, t copyTarget) (*process, int, error) {
	c, err := r.prepareCopy(m, t.dir, t.home)
	defer os.RemoveAll(c.images)
	defer os.RemoveAll(c.work)
	if err != nil {
		return nil, 0, err
	}
	extra := []string{}
	for _, mt := range templateMounts {
		src := map[string]string{"home": t.home, "run": c.run, "log": c.log}[mt[1]]
		extra = append(extra, "--external", "mnt["+mt[1]+"]:"+src)
	}
	procs := []string{} // not nil: the copy stays out of the template's cgroups
	if cg := r.cg; cg != nil {
		if procs, err = cg.join(c.uid); err != nil {
			return nil, 0, fmt.Errorf("the copy's cgroup: %w", err)
		}
	}
	if err := t.writeConfig(); err != nil {
		return nil, 0, err
	}
	port, err := r.allocatePort(t.owner, 0)
	if err != nil {
		return nil, 0, err
	}
	pid, err := r.ckpt.restoreFrom(ctx, c.images, c.root, c.work, procs, extra...)
	if err != nil {
		return nil, 0, err
	}
	st, err := readProcStat(pid)
	if err != nil {
		return nil, 0, fmt.Errorf("the restored gateway (pid %d) is gone: %w", pid, err)
	}
	p := adoptProcess(pid, st.start, c.log, true)
	if err := r.planReset(c.run, pid); err != nil {
		return p, 0, err
	}
	if err := thawNodeTree(c.run, m.Procs); err != nil {
		return p, 0, err
	}
	if err := r.attach(p, port, templatePort, t.home); err != nil {
		return p, 0, err
	}
	return p, port, nil
}

// copyFiles are the files of a copy being made, in its dir (restoreCopy).
type copyFiles struct {
	uid                          int // the copy's sandbox uid
	run, images, work, root, log string
}

// prepareCopy makes in dir what a copy of m is restored from and with: its home (the
// template's copied into home and given to the copy's uid), the hooks' dir, an empty log, the
// sandbox's root and the image rewritten for the copy's uid.
func (r *Runtime) prepareCopy(m *templateMeta, dir, home string) (copyFiles, error) {
	c := copyFiles{run: filepath.Join(dir, copyRunName), images: filepath.Join(dir, copyImageName), work: filepath.Join(dir, copyWorkName),
		root: filepath.Join(dir, sandboxRootName), log: filepath.Join(dir, logFileName)}
	tdir := r.templateDir(m.Key)
	if err := copyTree(filepath.Join(tdir, tplHome), home); err != nil {
		return c, fmt.Errorf("copy the template's home: %w", err)
	}
	var err error
	if c.uid, err = r.sbx.uids.of(home); err != nil {
		return c, err
	}
	if err := ownTree(home, ".", c.uid); err != nil {
		return c, err
	}
	if err := makeTemplateDir(c.run, c.uid); err != nil {
		return c, err
	}
	if err := os.WriteFile(c.log, nil, 0o600); err != nil {
		return c, err
	}
	if err := copyTree(filepath.Join(tdir, tplRoot), c.root); err != nil {
		return c, fmt.Errorf("the sandbox's root: %w", err)
	}
	if err := os.MkdirAll(c.work, 0o700); err != nil {
		return c, err
	}
	if err := rewriteImage(filepath.Join(tdir, tplImage), c.images, m.UID, c.uid); err != nil {
		return c, fmt.Errorf("the image for the agent's uid: %w", err)
	}
	return c, nil
}

// waitReborn waits until a thawed copy's gateway has restarted on the agent's config (its
// instance reset's signal) and accepts the agent's token (rebirth: oldToken is the template's).
func (r *Runtime) waitReborn(ctx context.Context, p *process, port int, oldToken, token string) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	url, b := endpoint(port), &rebirth{oldToken: oldToken}
	for {
		try, tcancel := context.WithTimeout(ctx, healthTimeout)
		err := b.check(try, r, url, token)
		tcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("the gateway exited with %s", p.exitDesc)
		case <-ctx.Done():
			if !b.wasGone {
				return fmt.Errorf("the gateway did not restart on the agent's config within %s: it never stopped serving as its template (%v)", r.opts.StartTimeout, err)
			}
			return fmt.Errorf("the gateway did not restart on the agent's config within %s: %w", r.opts.StartTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// planReset writes the thaw plan of the copy whose sandbox's init is init (its hooks' dir
// run): the restart that ends the engine's instance reset, in the gateway's own process
// (init's Node child). The reset's statements ran in the template before its dump
// (planForget).
func (r *Runtime) planReset(run string, init int) error {
	ir, ok := r.opts.Engine.(engine.InstanceResetter)
	if !ok {
		return nil
	}
	pid, err := gatewayNodePID(init)
	if err != nil {
		return fmt.Errorf("the restored sandbox: %w", err)
	}
	return writeHookPlan(run, thawPlanName, hookPlan{PID: pid, Signal: ir.InstanceReset().Signal})
}

// planForget writes the freeze plan of the template whose sandbox's init is init (its hooks'
// dir run): the engine's instance reset's statements on its state database, run by the
// gateway's own process once its threads are held, before the dump. So no copy restores the
// template's identity, and no statement runs in a copy beside the engine's restored database
// connections (which know the template's file: SQLite would not order their writes against a
// new connection's, and the database could be corrupted).
func (r *Runtime) planForget(run string, init int) error {
	ir, ok := r.opts.Engine.(engine.InstanceResetter)
	if !ok {
		return nil
	}
	reset := ir.InstanceReset()
	pid, err := gatewayNodePID(init)
	if err != nil {
		return fmt.Errorf("the template's sandbox: %w", err)
	}
	return writeHookPlan(run, freezePlanName, hookPlan{PID: pid, DB: path.Join(templateHome, reset.DB), SQL: reset.SQL})
}

// gatewayNodePID is the pid, in its sandbox's PID namespace, of the gateway's own process:
// init's Node child that runs the hooks.
func gatewayNodePID(init int) (int, error) {
	hooked := hookedNodeProcesses(init)
	for _, c := range childPIDs(init) {
		if slices.Contains(hooked, c) {
			return nsPID(c)
		}
	}
	return 0, errors.New("no gateway runs in it")
}

// forgetCopyLocked undoes a copy that failed: its gateway ended, its port released, its dir
// and home emptied (the cold start that follows begins from nothing).
func (a *agent) forgetCopyLocked() {
	if a.proc != nil {
		stopProcess(context.Background(), a.proc, 0, nil)
		a.proc = nil
	}
	a.rt.releasePorts(a.key)
	a.st = state{}
	a.prepared = false
	entries, _ := os.ReadDir(a.home)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(a.home, e.Name()))
	}
	for _, name := range []string{copyRunName, sandboxRootName, logFileName, stateFileNam, pidFileName} {
		_ = os.RemoveAll(filepath.Join(a.dir, name))
	}
}

// copyTree copies the tree at src into dst (made when missing): dirs, regular files and
// symlinks with their modes, nothing else. The trees are the runtime's own (a template's
// home, made by a gateway of no agent, and its root skeleton).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			return os.Chmod(to, info.Mode().Perm())
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case info.Mode().IsRegular():
			return copyRegular(p, to, info.Mode().Perm())
		}
		return nil
	})
}

// copyRegular copies the regular file src to dst with mode perm.
func copyRegular(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
