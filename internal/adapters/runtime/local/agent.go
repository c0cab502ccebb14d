package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// agent is the runtime's record of one agent. mu guards everything below it; the supervisor
// goroutine (supervise) and the Runtime methods both take it. Lock order: agent.mu, then
// Runtime.mu.
type agent struct {
	rt        *Runtime
	key       types.NamespacedName
	dir, home string
	log       logr.Logger

	wake      chan struct{} // pokes the supervisor (capacity 1)
	quit      chan struct{} // closed to end the supervisor
	done      chan struct{} // closed when the supervisor has ended
	closeOnce sync.Once
	steps     atomic.Int64 // supervision rounds done (tests wait for rounds, not for time)
	// copying is what Ensure reports while the agent's gateway is being born from its
	// engine's template (template_copy.go), nil otherwise.
	copying atomic.Pointer[runtime.Observed]

	mu       sync.Mutex
	closed   bool // deleted or shut down: Ensure refuses
	loaded   bool // st was read from disk
	prepared bool // the home dirs exist
	st       state
	env      map[string]string // Desired.Env of the last Ensure (memory only)
	token    string            // Desired.GatewayToken of the last Ensure (to redact logs)
	heapMiB  int64             // the gateway's Node heap from the Agent's memory limit (0: default)
	proc     *process
	// lazy is the page server of the gateway's last restore, nil once it is known to have
	// ended (checkpoint_lazy.go).
	lazy *lazyPages

	phase           runtime.Phase
	reason, message string
	since           time.Time
	pendingNotify   bool

	backoff   time.Duration // the last restart wait (0: none yet)
	retryAt   time.Time     // when a crashed gateway is restarted (zero: not scheduled)
	unhealthy int           // failed health checks in a row while Running
	// coldWhy, when set, is why a new agent's gateway starts cold instead of from its
	// engine's template (template_copy.go): the first start's status says it.
	coldWhy string
	// startedCold is coldWhy of the gateway starting now: its Running phase says it too.
	startedCold string
}

func (r *Runtime) newAgent(key types.NamespacedName) *agent {
	dir := r.AgentDir(key)
	return &agent{
		rt: r, key: key, dir: dir, home: filepath.Join(dir, homeDirName),
		log:  r.opts.Log.WithValues("agent", key.String()),
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
}

// poke wakes the supervisor.
func (a *agent) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// setPhase records what the runtime observes; any change is notified (by the supervisor).
func (a *agent) setPhase(p runtime.Phase, reason, message string) {
	if p != a.phase {
		a.since = time.Now()
		a.pendingNotify = true
	}
	if reason != a.reason || message != a.message {
		a.pendingNotify = true
	}
	a.phase, a.reason, a.message = p, reason, message
}

// takeNotify returns and clears the pending notification.
func (a *agent) takeNotify() bool {
	n := a.pendingNotify
	a.pendingNotify = false
	return n
}

func (a *agent) notify() {
	if a.rt.opts.Notify != nil {
		a.rt.opts.Notify(a.key)
	}
	a.rt.enqueue(a.key)
}

// observedLocked is what Ensure reports.
func (a *agent) observedLocked() runtime.Observed {
	o := runtime.Observed{
		Phase: a.phase, Reason: a.reason, Message: a.message, Since: a.since,
		Restarts: a.st.Restarts, EngineVersion: a.st.EngineVersion,
	}
	if a.st.EngineDir != "" {
		o.EngineVersion = a.rt.cachedVersion(a.st.EngineDir, a.st.EngineVersion)
	}
	if a.st.Port > 0 && a.phase != runtime.PhaseStopped {
		o.Endpoint = endpoint(a.st.Port)
	}
	return o
}

func endpoint(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// loadLocked reads state.json once.
func (a *agent) loadLocked() error {
	if a.loaded {
		return nil
	}
	st, err := readState(a.dir)
	if err != nil {
		return err
	}
	a.setStateLocked(st)
	return nil
}

// setStateLocked takes st as the agent's state (read from disk): its home is the recorded one.
func (a *agent) setStateLocked(st state) {
	a.st, a.loaded = st, true
	a.home = homeOf(a.dir, st)
}

// saveLocked writes state.json; a failure is logged (the state is rebuilt by the next Ensure).
func (a *agent) saveLocked() {
	if err := writeState(a.dir, a.st); err != nil {
		a.log.Error(err, "cannot write agent state")
	}
}

// prepareLocked creates the agent dir and home (0700), the engine state dir and workspace.
func (a *agent) prepareLocked() error {
	if a.prepared {
		return nil
	}
	// Not the workspace: the engine makes it on its first start, which it takes for a new
	// install only when its state dir holds nothing but the config (it skips its state
	// migrations then, about 2 s of a first start). Exec and the file operations make it when
	// they come first (ensureWorkspace).
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return err
	}
	if err := a.rt.attachHome(a.home); errors.Is(err, errUnbounded) {
		a.migrateHomeLocked()
	} else if err != nil {
		return err
	}
	if err := os.MkdirAll(a.home, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(a.home, 0o700); err != nil {
		return err
	}
	if _, err := mkdirInHome(a.home, a.rt.opts.Engine.Layout().StateDir); err != nil {
		return homeErr(err)
	}
	a.prepared = true
	return nil
}

// migrateHomeLocked moves a home made before homes had a size into a volume of its own when
// nothing runs in it (no gateway, no command); else, or when it does not fit, it stays
// unbounded until the agent is loaded again, and the log says so.
func (a *agent) migrateHomeLocked() {
	if a.proc != nil || a.rt.execsOf(a.key) > 0 {
		a.log.Info("this home has no size limit yet: it was made before homes had one and is in use", "home", a.home)
		return
	}
	if err := a.rt.vols.migrate(a.home); err != nil {
		a.log.Info("this home has no size limit: it was made before homes had one", "home", a.home, "why", err.Error())
		return
	}
	a.log.Info("the home was moved into a volume of its own", "home", a.home, "size", a.rt.opts.HomeSize)
}

// secretsLocked are the values log excerpts must not show.
func (a *agent) secretsLocked() []string {
	s := []string{a.token}
	for _, v := range a.env {
		s = append(s, v)
	}
	return s
}

// close ends the supervisor and, with stop, stops the gateway. Idempotent.
func (a *agent) close(ctx context.Context, stop bool) {
	a.closeOnce.Do(func() { close(a.quit) })
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if stop {
		a.stopLocked(ctx)
	} else if a.proc != nil {
		a.proc.dropNet() // the gateway runs on; the next manager serves its network
	}
}

// timeZero is the zero time (no restart scheduled).
var timeZero time.Time

// errClosed is returned by Ensure for an agent that is being deleted or shut down.
var errClosed = errors.New("agent is being removed")

// stopLocked stops the gateway, if any (SIGTERM to its group, SIGKILL after StopTimeout).
func (a *agent) stopLocked(ctx context.Context) {
	p := a.proc
	if p == nil {
		return
	}
	a.proc = nil
	a.log.Info("stopping gateway", "pid", p.pid)
	stopProcess(ctx, p, a.rt.opts.StopTimeout, &a.log)
	a.st.PID, a.st.StartTime = 0, 0
	a.unhealthy = 0
	a.saveLocked()
}

// crashedLocked records that the gateway is down against our will and schedules a restart
// after the backoff. healthySince is when the gone gateway became healthy (zero: never).
func (a *agent) crashedLocked(healthySince time.Time, reason, what string) {
	now := time.Now()
	b := a.rt.opts.RestartBackoff
	if !healthySince.IsZero() && now.Sub(healthySince) >= 2*b.Max {
		a.backoff = 0 // it ran long enough: start over
	}
	if a.backoff == 0 {
		a.backoff = b.Initial
	} else {
		a.backoff = min(2*a.backoff, b.Max)
	}
	a.retryAt = now.Add(a.backoff)
	a.st.Restarts++
	a.st.PID, a.st.StartTime = 0, 0
	a.saveLocked()
	msg := fmt.Sprintf("%s; restart %d in %s", what, a.st.Restarts, a.backoff)
	if tail := redact(tailLog(filepath.Join(a.dir, logFileName)), a.secretsLocked()); tail != "" {
		msg += "; last log lines:\n" + tail
	}
	a.setPhase(runtime.PhaseCrashed, reason, msg)
	a.log.Info("gateway down", "reason", reason, "what", what, "restarts", a.st.Restarts, "backoff", a.backoff)
}
