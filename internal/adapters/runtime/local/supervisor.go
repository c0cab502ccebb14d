package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Health checking.
const (
	// healthTimeout bounds one health request.
	healthTimeout = 3 * time.Second
	// unhealthyAfter failed checks in a row turn a Running gateway back to Starting.
	unhealthyAfter = 3
)

// noTimer: the supervisor waits for a poke or an exit only.
const noTimer = time.Duration(-1)

// supervise is the agent's supervisor goroutine: it notices exits, restarts crashed gateways
// when their backoff is over, polls health (HealthInterval while starting,
// RunningHealthInterval once running), rotates the log and notifies phase changes.
func (a *agent) supervise() {
	defer close(a.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		next := a.step(ctx)
		a.steps.Add(1)
		var tick <-chan time.Time
		if next >= 0 {
			timer.Reset(next)
			tick = timer.C
		}
		a.mu.Lock()
		var exited <-chan struct{}
		if a.proc != nil {
			exited = a.proc.exited
		}
		a.mu.Unlock()
		select {
		case <-a.quit:
			timer.Stop()
			return
		case <-a.wake:
		case <-tick:
		case <-exited:
		}
		timer.Stop()
	}
}

// step does one round of supervision and returns when the next one is due.
func (a *agent) step(ctx context.Context) time.Duration {
	notify := false
	defer func() {
		if notify {
			a.notify()
		}
	}()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return noTimer
	}
	p := a.proc
	if p != nil && p.hasExited() {
		a.handleExitLocked()
		p = nil
	}
	if p == nil {
		next := minTimer(a.retryLocked(ctx), a.packDueLocked())
		notify = a.takeNotify()
		a.mu.Unlock()
		return next
	}
	if a.phase == runtime.PhaseStarting && time.Since(a.since) > a.rt.opts.StartTimeout {
		a.proc = nil
		a.mu.Unlock()
		stopProcess(context.Background(), p, a.rt.opts.StopTimeout, &a.log)
		a.mu.Lock()
		a.crashedLocked(p.healthySince, agentsv1.ReasonGatewayStartTimeout,
			fmt.Sprintf("the gateway did not answer its health check within %s and was killed", a.rt.opts.StartTimeout))
		notify = a.takeNotify()
		a.mu.Unlock()
		return 0
	}
	url := endpoint(a.st.Port)
	a.mu.Unlock()

	if err := rotateLog(filepath.Join(a.dir, logFileName), a.rt.opts.MaxLogSize); err != nil {
		a.log.Error(err, "cannot rotate the gateway log")
	}
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	err := a.rt.opts.Engine.Healthy(hctx, url)
	cancel()

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc != p || p.hasExited() || ctx.Err() != nil {
		notify = a.takeNotify()
		return 0 // changed meanwhile: look again
	}
	a.healthCheckedLocked(p, url, err)
	notify = a.takeNotify()
	if a.phase == runtime.PhaseRunning {
		return a.rt.opts.RunningHealthInterval
	}
	return a.rt.opts.HealthInterval
}

// minTimer is the sooner of two waits (noTimer: none).
func minTimer(a, b time.Duration) time.Duration {
	switch {
	case a == noTimer:
		return b
	case b == noTimer:
		return a
	}
	return min(a, b)
}

// retryLocked starts a gateway that is not running once its restart backoff has passed and
// says when the next round is due (noTimer: none, it is not to be restarted).
func (a *agent) retryLocked(ctx context.Context) time.Duration {
	if a.retryAt.IsZero() || a.st.Stopped {
		return noTimer
	}
	if wait := time.Until(a.retryAt); wait > 0 {
		return wait
	}
	a.retryAt = time.Time{}
	a.startLocked(ctx)
	return 0
}

// healthCheckedLocked records the health check of p at url (err: it failed): a healthy
// gateway is running; a running one that failed unhealthyAfter checks in a row is starting
// again.
func (a *agent) healthCheckedLocked(p *process, url string, err error) {
	switch {
	case err == nil:
		a.unhealthy = 0
		if p.healthySince.IsZero() {
			p.healthySince = time.Now()
		}
		if a.phase != runtime.PhaseRunning {
			a.log.Info("gateway is healthy", "pid", p.pid, "endpoint", url)
			reason, message := "", ""
			if a.startedCold != "" {
				reason, message = agentsv1.ReasonGatewayTemplateUnavailable, "the gateway started cold: "+a.startedCold
				a.startedCold = ""
			}
			a.setPhase(runtime.PhaseRunning, reason, message)
		}
	case a.phase == runtime.PhaseRunning:
		a.unhealthy++
		if a.unhealthy >= unhealthyAfter {
			a.setPhase(runtime.PhaseStarting, agentsv1.ReasonGatewayUnhealthy, "the gateway does not answer its health check: "+err.Error())
		}
	}
}

// handleExitLocked records the exit of a.proc (which has exited) as a crash; a gateway
// restored from a checkpoint that ends soon after is a failed restore instead, and starts
// anew at once (restoreFailedLocked).
func (a *agent) handleExitLocked() {
	p := a.proc
	a.proc = nil
	killGroup(p.pid) // whatever the gateway left in its group
	if p.restored && time.Since(p.started) < restoredGrace {
		why := fmt.Errorf("the restored gateway exited with %s after %s", p.exitDesc, time.Since(p.started).Round(time.Millisecond))
		if err := a.lazy.failure(); err != nil {
			why = fmt.Errorf("the restored gateway was ended: its memory could not all be restored: %w", err)
		}
		a.restoreFailedLocked(context.Background(), why)
		return
	}
	if a.configChangedWhileStarting(p) {
		a.log.Info("the gateway's config changed while it started, which the engine refuses (exit 78): starting it again", "pid", p.pid)
		a.startLocked(context.Background())
		return
	}
	what := "the gateway exited with " + p.exitDesc
	if uid, ok := a.rt.cgroupUID(a.home); ok && a.rt.cg.oomKills(uid) > p.oomKills {
		// As kube says of a container: the kernel ended it in its agent's cgroup.
		l, _ := a.rt.cg.limitsOf(uid)
		what += fmt.Sprintf(" (OOMKilled: over the agent's memory limit of %d MiB)", l.mem>>20)
	}
	a.crashedLocked(p.healthySince, agentsv1.ReasonCrashed, what)
}

// exitConfig is the engine's exit code for a configuration-class startup failure (EX_CONFIG).
const exitConfig = 78

// configChangedWhileStarting reports whether p, which has exited, is a gateway the engine
// refused to report ready because its config file changed while it started: the engine's
// startup guard ends such a start with exit 78 ("OpenClaw migration inputs changed during
// startup ... Restart OpenClaw") and asks to be started again on the final config. The
// platform's own writes do that (the Agent controller renders the config once the gateway's
// home exists, an edit through the REST door): a start to run again at once, not a crash. An
// exit 78 on the config it started on (an invalid one) stays a crash.
func (a *agent) configChangedWhileStarting(p *process) bool {
	return p.exitCode == exitConfig && p.healthySince.IsZero() && !a.st.Stopped &&
		p.authored != "" && a.configDigest() != p.authored
}

// configDigest is the digest of the agent's engine config file ("" when it cannot be read).
func (a *agent) configDigest() string {
	root, err := os.OpenRoot(a.home)
	if err != nil {
		return ""
	}
	defer root.Close()
	b, err := root.ReadFile(filepath.Clean(a.rt.opts.Engine.Layout().ConfigPath))
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// attach gives a new gateway process of home (started, restored, adopted, a pool member's)
// what the runtime keeps for it: its network plumbing on port (netns.go) and its cgroup's
// OOM kill count so far (handleExitLocked tells an OOM kill by it).
func (r *Runtime) attach(p *process, port, inner int, home string) error {
	p.oomKills = r.oomKills(home)
	return r.plumbNet(p, port, inner, home)
}

// oomKills is the count of OOM kills in home's cgroup (0 without cgroups).
func (r *Runtime) oomKills(home string) int64 {
	if uid, ok := r.cgroupUID(home); ok {
		return r.cg.oomKills(uid)
	}
	return 0
}

// cgroupUID is the uid home's cgroup is named after (false: agents have no cgroups here).
func (r *Runtime) cgroupUID(home string) (int, bool) {
	if r.cg == nil {
		return 0, false
	}
	uid, err := r.sbx.uids.of(home)
	return uid, err == nil
}
