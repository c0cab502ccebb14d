package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Warm pools (runtime.Pooler).
//
// A pool keeps Size gateways of one engine version booted, each a member with a home of its
// own, <StateDir>/pool/<member>/home, its own port and a random token in the engine's initial
// config (no identity). A supervisor goroutine per member polls its health; a member that
// exits, never becomes healthy within StartTimeout or stops answering is discarded (process
// group stopped, dir removed) and the pool's refiller starts another after a backoff that
// doubles from RestartBackoff.Initial to RestartBackoff.Max while members keep failing.
//
// Ensure of a new agent claims a ready member (claim.go): the member leaves its pool under
// poolMu before anything else happens to it, so no member ever serves two agents. Members are
// never adopted across a manager restart: New stops and removes those no agent claimed, and
// Shutdown stops and removes every member whatever KeepRunningOnShutdown says.

// poolDirName is the dir of the members under StateDir.
const poolDirName = "pool"

// memberNamespace keys members' port reservations (no namespace can have this name).
const memberNamespace = "\x00pool"

// pool is one GatewayPool. Every field is guarded by Runtime.poolMu.
type pool struct {
	name      string
	version   string
	engineDir string
	size      int
	members   map[string]*member // booting and ready; never a claimed one
	removed   bool               // RemovePool or Shutdown: the refiller ends

	claimed   int64
	claims    []runtime.PoolClaim
	discarded int64 // reservations discarded (reserve.go)
	failures  int32
	lastFail  string
	backoff   time.Duration
	retryAt   time.Time

	wake chan struct{} // pokes the refiller (capacity 1)
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// member is one warm gateway of a pool.
type member struct {
	pool      *pool
	id        string
	dir, home string
	port      int
	token     string // the member's own gateway token (to redact its log)
	proc      *process
	template  string // the key of the template it is a copy of ("": booted)
	// rebirth follows a copy through its restart on the member's config (its supervisor's
	// only; nil: booted).
	rebirth *rebirth

	// Guarded by Runtime.poolMu.
	ready     bool
	readyAt   time.Time
	unhealthy int
	gone      bool          // claimed or discarded: its supervisor leaves it alone
	quit      chan struct{} // closed when gone
}

func memberKey(id string) types.NamespacedName {
	return types.NamespacedName{Namespace: memberNamespace, Name: id}
}

var _ runtime.Pooler = (*Runtime)(nil)

// SetPool implements runtime.Pooler.
func (r *Runtime) SetPool(_ context.Context, name string, spec runtime.PoolSpec) error {
	version, size := spec.Version, spec.Size
	engineDir, ok := r.opts.EngineDirs[version]
	if !ok {
		return fmt.Errorf("engine version %q is not installed on this host (installed: %s)", version, strings.Join(sortedKeys(r.opts.EngineDirs), ", "))
	}
	size = max(size, 0)
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if r.poolsClosed {
		return errShutdown
	}
	p := r.pools[name]
	if p == nil {
		p = &pool{name: name, members: map[string]*member{}, wake: make(chan struct{}, 1)}
		r.pools[name] = p
		r.poolWG.Add(1)
		go r.refill(p)
	}
	if p.version == version && p.engineDir == engineDir && p.size == size {
		return nil
	}
	if p.version != version || p.engineDir != engineDir {
		if p.version != "" {
			r.opts.Log.Info("warm pool changes engine version: its members are replaced", "pool", name, "from", p.version, "to", version)
		}
		for _, m := range p.members {
			r.discardLocked(m)
		}
		p.version, p.engineDir = version, engineDir
		p.failures, p.backoff, p.retryAt, p.lastFail = 0, 0, time.Time{}, ""
	}
	p.size = size
	p.poke()
	return nil
}

// RemovePool implements runtime.Pooler.
func (r *Runtime) RemovePool(name string) {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if p := r.pools[name]; p != nil {
		delete(r.pools, name)
		r.removePoolLocked(p)
	}
}

func (r *Runtime) removePoolLocked(p *pool) {
	p.removed = true
	for _, m := range p.members {
		r.discardLocked(m)
	}
	p.poke()
}

// PoolStatus implements runtime.Pooler.
func (r *Runtime) PoolStatus(name string) runtime.PoolStatus {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	p := r.pools[name]
	if p == nil {
		return runtime.PoolStatus{}
	}
	s := runtime.PoolStatus{
		Version: p.version, Size: p.size, Claimed: p.claimed, Failures: p.failures,
		LastFailure: p.lastFail, RetryAt: p.retryAt, Claims: slices.Clone(p.claims),
	}
	for _, m := range p.members {
		if m.ready {
			s.Ready++
		} else {
			s.Booting++
		}
	}
	return s
}

// SetupPoolWatches implements runtime.Pooler: the pools' notifications.
func (r *Runtime) SetupPoolWatches(b *builder.Builder) *builder.Builder {
	return b.WatchesRawSource(source.Channel(r.poolEvents, &handler.EnqueueRequestForObject{}))
}

// notifyPool passes the pool's name to the GatewayPool controller without ever blocking.
func (r *Runtime) notifyPool(name string) {
	gp := &agentsv1.GatewayPool{}
	gp.Name = name
	select {
	case r.poolEvents <- event.GenericEvent{Object: gp}:
	default:
	}
}

// refill is the pool's refiller goroutine: it starts members until the pool holds Size (not
// before retryAt after failures) and discards the extra ones when Size shrinks.
func (r *Runtime) refill(p *pool) {
	defer r.poolWG.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.poolMu.Lock()
		if p.removed {
			r.poolMu.Unlock()
			return
		}
		shrunk := r.shrinkLocked(p)
		need, wait := 0, time.Duration(-1)
		if len(p.members) < p.size {
			if d := time.Until(p.retryAt); d > 0 {
				wait = d
			} else {
				need = p.size - len(p.members)
			}
		}
		name, version, engineDir := p.name, p.version, p.engineDir
		r.poolMu.Unlock()
		if shrunk {
			r.notifyPool(name)
		}
		for range need {
			if !r.addMember(p, version, engineDir) {
				break
			}
		}
		if need > 0 {
			continue // look again: failures, a new size
		}
		var tick <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			tick = timer.C
		}
		select {
		case <-p.wake:
		case <-tick:
		}
		timer.Stop()
	}
}

// shrinkLocked discards the members beyond Size, booting ones first.
func (r *Runtime) shrinkLocked(p *pool) bool {
	extra := len(p.members) - p.size
	if extra <= 0 {
		return false
	}
	ms := make([]*member, 0, len(p.members))
	for _, m := range p.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int {
		if a.ready != b.ready {
			if a.ready {
				return 1
			}
			return -1
		}
		return b.readyAt.Compare(a.readyAt) // the most recently ready first
	})
	for _, m := range ms[:extra] {
		r.discardLocked(m)
	}
	return true
}

// addMember starts one member of p and adds it to the pool; false when the pool wants no
// more (or the start failed: the backoff applies).
func (r *Runtime) addMember(p *pool, version, engineDir string) bool {
	m, err := r.startMember(p, version, engineDir)
	r.poolMu.Lock()
	if err != nil {
		r.memberFailedLocked(p, nil, "cannot start a gateway: "+err.Error())
		r.poolMu.Unlock()
		r.notifyPool(p.name)
		return false
	}
	if p.removed || p.engineDir != engineDir || len(p.members) >= p.size {
		r.discardLocked(m)
		r.poolMu.Unlock()
		return false
	}
	p.members[m.id] = m
	r.poolWG.Add(1)
	go r.superviseMember(m)
	r.poolMu.Unlock()
	r.notifyPool(p.name)
	return true
}

// memberFailedLocked records a member that crashed, never became healthy or could not be
// started (m nil), discards it and delays the next start: the backoff doubles from
// RestartBackoff.Initial to Max, and starts over after a member that stayed healthy for
// 2×Max.
func (r *Runtime) memberFailedLocked(p *pool, m *member, why string) {
	b := r.opts.RestartBackoff
	now := time.Now()
	if m != nil {
		if m.ready && now.Sub(m.readyAt) >= 2*b.Max {
			p.backoff, p.failures = 0, 0
		}
		if tail := redact(tailLog(filepath.Join(m.dir, logFileName)), []string{m.token}); tail != "" {
			why += "; last log lines:\n" + tail
		}
		r.discardLocked(m)
	}
	if p.backoff == 0 {
		p.backoff = b.Initial
	} else {
		p.backoff = min(2*p.backoff, b.Max)
	}
	p.failures++
	p.retryAt = now.Add(p.backoff)
	p.lastFail = why
	r.opts.Log.Info("warm gateway failed", "pool", p.name, "why", why, "failures", p.failures, "backoff", p.backoff)
	p.poke()
}

// discardLocked takes m out of its pool and stops and removes it in the background (Shutdown
// waits for it).
func (r *Runtime) discardLocked(m *member) {
	if m.pool != nil && m.pool.members[m.id] == m {
		delete(m.pool.members, m.id)
	}
	if !m.gone {
		m.gone = true
		close(m.quit)
	}
	r.poolWG.Add(1)
	go func() {
		defer r.poolWG.Done()
		r.destroyMember(m)
	}()
}

// destroyMember stops m's gateway and removes its dir and port reservation.
func (r *Runtime) destroyMember(m *member) {
	if m.proc != nil {
		stopProcess(context.Background(), m.proc, r.opts.StopTimeout, nil)
	}
	r.endStragglers(context.Background(), m.home)
	if err := removeHomeDir(m.dir); err != nil {
		r.opts.Log.Error(err, "cannot remove a warm gateway's dir", "dir", m.dir)
	} else {
		r.releaseUIDs(m.dir)
	}
	r.mu.Lock()
	r.releasePortsLocked(memberKey(m.id))
	r.mu.Unlock()
}

// shutdownPools stops every pool and member (Shutdown).
func (r *Runtime) shutdownPools() {
	r.poolMu.Lock()
	r.poolsClosed = true
	r.discardReservationsLocked()
	for name, p := range r.pools {
		delete(r.pools, name)
		r.removePoolLocked(p)
	}
	r.poolMu.Unlock()
}

// removeStaleMembers removes the member dirs under StateDir that no agent claimed (left by a
// manager that died; reapOrphans stopped their gateways before).
func (r *Runtime) removeStaleMembers(claimed map[string]bool) {
	root := filepath.Join(r.opts.StateDir, poolDirName)
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if claimed[filepath.Join(dir, homeDirName)] {
			continue
		}
		r.opts.Log.Info("removing a warm gateway of a previous manager", "dir", dir)
		if err := removeHomeDir(dir); err != nil {
			r.opts.Log.Error(err, "cannot remove a stale warm gateway", "dir", dir)
		}
	}
}
