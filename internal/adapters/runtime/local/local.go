// Package local is the embedded default runtime: every agent is an engine gateway process
// (`openclaw gateway run`) on this host, supervised by the manager.
//
// An agent lives in <StateDir>/agents/<namespace>/<name>/:
//
//	home/         the agent's HOME and OPENCLAW_HOME (0700); the engine keeps its state here
//	gateway.log   the gateway's stdout and stderr (copied to gateway.log.1 and truncated at MaxLogSize)
//	gateway.pid   the gateway's pid, for humans and scripts
//	state.json    port, pid, what the running gateway was started with, restart count
//
// The gateway token is only in the engine config (mode 0600), never on a command line or in
// state.json (which keeps a SHA-256 of it to notice rotations). Attached secrets (Desired.Env)
// are kept in memory only and given to the gateway and to Exec as environment.
//
// Processes run in their own process group, so stopping one signals its whole tree (SIGTERM,
// then SIGKILL after StopTimeout). A supervisor goroutine per agent polls the gateway's health,
// notices exits, restarts crashed gateways with exponential backoff and calls Notify on every
// phase change. Gateways survive a manager crash: New re-adopts every gateway whose pid is
// still alive and still our engine process (pid, start time and binary match). On a clean
// shutdown (Shutdown) the gateways are stopped unless KeepRunningOnShutdown is set: `agentplane
// dev` must leave no process behind when it exits.
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/archive"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Name is the runtime name.
const Name = "local"

// Defaults for Options.
const (
	DefaultFirstPort             = 19000
	DefaultLastPort              = 19999
	DefaultHealthInterval        = 200 * time.Millisecond
	DefaultRunningHealthInterval = 5 * time.Second
	DefaultBackoffInitial        = 2 * time.Second
	DefaultBackoffMax            = 2 * time.Minute
	DefaultStopTimeout           = 10 * time.Second
	DefaultStartTimeout          = 5 * time.Minute
	DefaultMaxLogSize            = 10 << 20
	DefaultRestoreMaxFiles       = 200000
	DefaultRestoreMaxBytes       = 8 << 30
	DefaultBindTimeout           = 10 * time.Second
	DefaultReservationTimeout    = 2 * time.Minute
	// DefaultGatewayHeapMiB is the V8 old space a gateway may take (--max-old-space-size), the
	// kube runtime's default too (a share of its default 2 GiB container limit).
	DefaultGatewayHeapMiB = 1536
)

// PortRange is an inclusive range of TCP ports on 127.0.0.1.
type PortRange struct {
	First, Last int
}

// Backoff is the wait before restarting a crashed gateway: Initial after the first crash,
// doubled after each further one up to Max. It starts over once a gateway stayed up for 2×Max.
type Backoff struct {
	Initial, Max time.Duration
}

// Options configure the local Runtime.
type Options struct {
	// StateDir holds the agents (<StateDir>/agents/<namespace>/<name>/). Required.
	StateDir string
	// Engine knows the engine's command line and files. Required.
	Engine engine.Engine
	// EngineDirs maps an engine version to its install dir (with bin/openclaw). Required.
	EngineDirs map[string]string
	// PortRange is where gateway ports are allocated (DefaultFirstPort-DefaultLastPort).
	PortRange PortRange
	// HealthInterval is the health poll while a gateway starts (DefaultHealthInterval: a
	// gateway is reported Running at most that long after it first answers; a poll before it
	// listens is a refused connection); RunningHealthInterval the poll once it runs
	// (DefaultRunningHealthInterval).
	HealthInterval        time.Duration
	RunningHealthInterval time.Duration
	// RestartBackoff spaces the restarts of a crashing gateway (2 s doubling to 2 min).
	RestartBackoff Backoff
	// StopTimeout is how long a stopping gateway gets after SIGTERM before SIGKILL (10 s).
	StopTimeout time.Duration
	// StartTimeout is how long a gateway may take to become healthy before it is killed and
	// counted as a crash (DefaultStartTimeout).
	StartTimeout time.Duration
	// MaxLogSize is the size at which gateway.log is rotated (DefaultMaxLogSize).
	MaxLogSize int64
	// RestoreLimits bound RestoreWorkspace (DefaultRestoreMaxFiles, DefaultRestoreMaxBytes).
	RestoreLimits archive.Limits
	// Notify is told when an agent's phase changes outside Ensure, besides the Agent
	// controller (SetupWatches). Optional.
	Notify runtime.Notifier
	// Log receives lifecycle messages (never secrets).
	Log logr.Logger
	// KeepRunningOnShutdown leaves the gateways running when Shutdown is called, for the next
	// manager to adopt. The default (false) stops them: in dev mode Ctrl-C leaves nothing behind.
	// Warm pool members are stopped either way.
	KeepRunningOnShutdown bool
	// BindTimeout is how long a warm gateway claimed by a new agent may take to serve the
	// agent's token (the engine hot-reloads its config) before it is discarded and the agent
	// starts cold (DefaultBindTimeout).
	BindTimeout time.Duration
	// ReservationTimeout is how long a warm gateway reserved for a new agent (ReserveGateway)
	// waits for the agent's first Ensure before it is discarded (DefaultReservationTimeout).
	ReservationTimeout time.Duration
	// Sandbox is how gateways and commands are contained (sandbox.go): SandboxAuto (the
	// default), SandboxRequired or SandboxOff. Unsandboxed, the runtime serves the agents of
	// one workspace only: the first one it runs an agent of.
	Sandbox string
	// ReadOnlyPaths are further host paths every sandbox shows read-only at their own path
	// (shared tools, say), besides the system's files and the engine. The paths listed in
	// $AGENTPLANE_SANDBOX_READONLY (colon-separated) are added to them.
	ReadOnlyPaths []string
	// HostServices are addresses on the host's loopback ("127.0.0.1:8080": the model proxy)
	// that, when each gateway has a network namespace of its own (netns.go), its
	// agent reaches at the same address inside it; nothing else of the host is reachable.
	HostServices []string
	// CAFile is a PEM file of certificate authorities the agents' Node trusts besides its own
	// store (NODE_EXTRA_CA_CERTS in every gateway's and command's environment): the CA of an
	// egress that intercepts TLS, without which the engine's registry installs (plugins,
	// skills) fail. Every sandbox shows it read-only at its own path. Empty: Node's own only.
	CAFile string
	// PlatformService is the host address ("127.0.0.1:8080") of the platform's own service
	// for its gateways (the model proxy and the channel relays; one of HostServices). With a
	// network namespace per gateway, each also reaches it at PlatformAddr, an address that is
	// the same for every platform whatever port it listens on.
	PlatformService string
	// GatewayEnv gives what is in the environment of every gateway and engine command, above
	// the agent's own (Desired.Env): the platform's, the same for every agent (the channel
	// relays' bases, which a relayed channel's plugin reads at its start: set from the first
	// start, a channel connected later changes only the config, which the engine applies
	// without a restart). New calls it once with the address the gateways reach
	// PlatformService at (PlatformAddr in their network namespaces, else PlatformService): a
	// template's checkpoint holds its gateway's environment, so an address that changed with
	// the platform's port would make every platform build a template of its own. A gateway
	// started under another environment restarts on its next Ensure, as for a new Desired.Env.
	GatewayEnv func(platform string) map[string]string
	// Busy reports whether something outside the gateway is mid-way through a call of the
	// agent's that must not be cut (the channel relay's sends): a checkpoint waits, within
	// its settle bound, until it is not (nil: nothing is).
	Busy func(agent types.NamespacedName) bool
	// Quiesce ends the agent's connections to the platform's service that the gateway keeps
	// open (the channel relay's polls and websockets) before its gateway is checkpointed, so
	// that the dump finds its clients waiting to reconnect rather than on a connection a
	// restore would give back closed; the runtime calls release once the dump has ended
	// (nil: nothing to end).
	Quiesce func(agent types.NamespacedName) (release func())
	// Egress opens destinations the egress proxy of the gateways' network namespaces refuses
	// by default (egress.go: it reaches the public internet only).
	Egress []EgressRule
	// MemoryLimit and PidsLimit bound each agent's cgroup, as root (cgroup.go):
	// DefaultMemoryLimit bytes and DefaultPidsLimit processes and threads when 0.
	MemoryLimit, PidsLimit int64
	// HomeSize bounds each agent's home, as root (homevol.go): DefaultHomeSize bytes when 0.
	HomeSize int64
	// GatewayHeapMiB is the most a gateway's V8 old space may take (DefaultGatewayHeapMiB); the
	// gateway gets it with the platform's other Node settings (runtime.GatewayNodeEnv).
	GatewayHeapMiB int64
	// CompileCacheDir keeps the engines' compile caches, warmed once per engine dir and shown
	// read-only to every sandbox (compilecache.go); <StateDir>/compile-cache by default.
	// Runtimes of different state dirs may share one.
	CompileCacheDir string
	// UIDDir is where, as root, the homes' sandbox uids are allocated (uids.go); every runtime
	// on the machine must share it. DefaultUIDDir when empty.
	UIDDir string
	// CRIU is the CRIU binary that checkpoints a suspended agent's gateway and restores it
	// when the agent wakes (checkpoint.go); "" = $AGENTPLANE_CRIU, else a `criu` beside the
	// running executable; "off" = none. Without one that passes `criu check` and a test
	// checkpoint and restore of a sandboxed process at start (checkpoint_probe.go), or
	// unsandboxed, or not as root, a suspended gateway is stopped and cold-started on resume;
	// Checkpoints says why.
	CRIU string
	// CRIUTimeout cuts off a CRIU run, the start's test checkpoint included (2 min when zero).
	CRIUTimeout time.Duration
	// CheckpointPackAfter is how long a suspended agent sleeps before its checkpoint's own
	// pages are compressed (checkpoint_pack.go: about a fifth of the disk, a second more to
	// wake): DefaultCheckpointPackAfter when 0, never when negative.
	CheckpointPackAfter time.Duration
	// EagerRestore restores a waking gateway's memory in full before it runs (CRIU's
	// default) instead of on demand (checkpoint_lazy.go: a fifth of the wake here). Lazy
	// restores need userfaultfd; LazyRestore says whether they are used.
	EagerRestore bool
	// Templates gives each new agent without an environment of its own a copy of its
	// engine's template gateway instead of a boot (templates.go). They need checkpoints (CRIU)
	// and the reseed addon ($AGENTPLANE_RESEED, else agentplane-reseed.node beside the running
	// executable); without them new agents boot, and their status says why.
	Templates bool
	// TemplateDir keeps the engines' templates (<StateDir>/templates by default). Runtimes of
	// different state dirs on one machine may share one.
	TemplateDir string
	// MemoryMerge marks each gateway's memory mergeable by the kernel's same-page merging
	// (KSM; memmerge.go), started or restored: pages that agents' gateways hold alike are
	// kept once. Off by default: a merged page is shared between tenants, and the time a write
	// to it takes tells an agent that another agent holds the same bytes (a known side
	// channel). Pages merge only while the kernel's daemon runs (/sys/kernel/mm/ksm/run, set
	// by root); New fails on a kernel that cannot mark a gateway.
	MemoryMerge bool
}

// Runtime runs agents as local processes. Create it with New; call Shutdown when done.
type Runtime struct {
	opts Options

	mu     sync.Mutex
	agents map[types.NamespacedName]*agent
	ports  map[int]types.NamespacedName
	closed bool
	execs  map[int]types.NamespacedName // process groups of running Exec commands
	lock   *os.File                     // flock on <StateDir>/runtime.lock

	// events carry Notify's keys to the Agent controller (SetupWatches).
	events chan event.GenericEvent

	verMu    sync.Mutex
	versions map[string]string    // engine dir -> version it reports
	verFail  map[string]time.Time // engine dir -> when its version command last failed

	// Warm pools (pool.go). Lock order: agent.mu, then poolMu, then mu.
	poolMu      sync.Mutex
	pools       map[string]*pool
	poolsClosed bool
	poolEvents  chan event.GenericEvent               // the GatewayPool controller's notifications
	poolWG      sync.WaitGroup                        // refillers, member supervisors, member stops
	reserved    map[types.NamespacedName]*reservation // warm gateways reserved for agents (reserve.go)
	// bindFault, when set (tests), fails the bind of the claimed member named.
	bindFault func(member string) error

	// sbx runs gateways and commands in sandboxes; nil when unsandboxed (unsandboxed says
	// why), and then tenant is the one workspace (namespace) served.
	sbx *sandbox
	// cg places each agent's sandboxes into its cgroup (nil: noCgroups says why not).
	cg        *cgroups
	noCgroups string
	// netns: each gateway has a network namespace of its own (netns.go; false: noNetns says
	// why not).
	netns   bool
	noNetns string
	// vols gives each home a volume of HomeSize (homevol.go; nil: noHomeLimit says why not).
	vols        *homeVolumes
	noHomeLimit string
	egress      *http.Server // the egress proxy (egress.go; nil: none)
	// gatewayEnv is Options.GatewayEnv's environment, made once in New.
	gatewayEnv  map[string]string
	unsandboxed string
	// ckpt checkpoints suspended gateways; nil when it cannot (noCheckpoint says why).
	ckpt         *checkpointer
	noCheckpoint string
	// The engines' templates (templates.go), by engine dir, and the reseed addon their
	// copies load ("" when there is none).
	tplMu  sync.Mutex
	tpls   map[string]*templateState
	reseed string
	tenant string

	// The engines' compile caches (compilecache.go), by engine dir: sealed, being warmed (closed
	// when done), last failed warm-up. ccCtx ends at Shutdown; ccWG waits for the warm-ups.
	ccMu      sync.Mutex
	ccReady   map[string]*compileCache
	ccWarming map[string]chan struct{}
	ccFail    map[string]warmFailure
	ccCtx     context.Context
	ccStop    context.CancelFunc
	ccWG      sync.WaitGroup
	// lazyWG waits for the page servers of lazy restores (checkpoint_lazy.go).
	lazyWG sync.WaitGroup
}

// versionRetry is how long a failed version command is not run again for the same dir.
const versionRetry = time.Minute

var _ runtime.Runtime = (*Runtime)(nil)

// errShutdown is returned by Ensure after Shutdown.
var errShutdown = errors.New("local runtime is shut down")

// New returns a Runtime over opts.StateDir and adopts the gateways a previous manager left
// running there.
func New(opts Options) (*Runtime, error) {
	if opts.StateDir == "" || opts.Engine == nil || len(opts.EngineDirs) == 0 {
		return nil, errors.New("local runtime: StateDir, Engine and EngineDirs are required")
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	opts.StateDir = abs
	setDefaults(&opts)
	if opts.PortRange.First <= 0 || opts.PortRange.Last < opts.PortRange.First || opts.PortRange.Last > 65535 {
		return nil, fmt.Errorf("local runtime: bad port range %d-%d", opts.PortRange.First, opts.PortRange.Last)
	}
	if err := os.MkdirAll(filepath.Join(opts.StateDir, "agents"), 0o700); err != nil {
		return nil, err
	}
	lock, err := lockStateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	r := &Runtime{
		opts:       opts,
		lock:       lock,
		execs:      map[int]types.NamespacedName{},
		agents:     map[types.NamespacedName]*agent{},
		ports:      map[int]types.NamespacedName{},
		versions:   map[string]string{},
		verFail:    map[string]time.Time{},
		events:     make(chan event.GenericEvent, notifyBuffer),
		pools:      map[string]*pool{},
		tpls:       map[string]*templateState{},
		reseed:     findReseed(),
		reserved:   map[types.NamespacedName]*reservation{},
		poolEvents: make(chan event.GenericEvent, notifyBuffer),
		ccReady:    map[string]*compileCache{},
		ccWarming:  map[string]chan struct{}{},
		ccFail:     map[string]warmFailure{},
	}
	// Before the sandbox, which starts what an error would have to stop (the egress proxy).
	if err := r.setupMemoryMerge(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	r.ccCtx, r.ccStop = context.WithCancel(context.Background())
	if err := r.setupSandbox(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	if opts.GatewayEnv != nil {
		r.gatewayEnv = opts.GatewayEnv(r.platformAddr())
	}
	if r.sbx != nil && r.sbx.root {
		r.useCheckpointer(newCheckpointer(context.Background(), opts.CRIU, opts.CRIUTimeout))
	} else {
		r.noCheckpoint = "checkpoints need a sandbox as root"
	}
	if r.ckpt != nil {
		r.opts.Log.Info("suspended gateways are checkpointed (CRIU)", "criu", r.ckpt.criu)
		if r.ckpt.eager != "" {
			r.opts.Log.Info("a waking gateway's memory is restored in full before it runs", "why", r.ckpt.eager)
		}
	} else {
		r.opts.Log.Info("suspended gateways are stopped and cold-started on resume", "why", r.noCheckpoint)
	}
	if ok, why := r.Templates(); ok {
		r.opts.Log.Info("new agents' gateways are born from their engine's template")
	} else if opts.Templates {
		r.opts.Log.Info("new agents' gateways boot cold: no gateway templates", "why", why)
	}
	claimed := r.adoptAll()
	r.reapOrphans()
	reapDeadWarmUps(r.compileCacheRoot(), r.opts.Log)
	r.removeStaleMembers(claimed)
	return r, nil
}

func setDefaults(o *Options) {
	if o.PortRange == (PortRange{}) {
		o.PortRange = PortRange{DefaultFirstPort, DefaultLastPort}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HealthInterval, DefaultHealthInterval)
	if o.CheckpointPackAfter == 0 {
		o.CheckpointPackAfter = DefaultCheckpointPackAfter
	}
	def(&o.RunningHealthInterval, DefaultRunningHealthInterval)
	def(&o.RestartBackoff.Initial, DefaultBackoffInitial)
	def(&o.RestartBackoff.Max, DefaultBackoffMax)
	if o.RestartBackoff.Max < o.RestartBackoff.Initial {
		o.RestartBackoff.Max = o.RestartBackoff.Initial
	}
	def(&o.StopTimeout, DefaultStopTimeout)
	def(&o.StartTimeout, DefaultStartTimeout)
	def(&o.BindTimeout, DefaultBindTimeout)
	def(&o.ReservationTimeout, DefaultReservationTimeout)
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.PidsLimit <= 0 {
		o.PidsLimit = DefaultPidsLimit
	}
	if o.HomeSize <= 0 {
		o.HomeSize = DefaultHomeSize
	}
	if o.GatewayHeapMiB <= 0 {
		o.GatewayHeapMiB = DefaultGatewayHeapMiB
	}
	if o.MaxLogSize <= 0 {
		o.MaxLogSize = DefaultMaxLogSize
	}
	if o.RestoreLimits == (archive.Limits{}) {
		o.RestoreLimits = archive.Limits{MaxFiles: DefaultRestoreMaxFiles, MaxBytes: DefaultRestoreMaxBytes}
	}
}

// Name implements runtime.Runtime.
func (r *Runtime) Name() string { return Name }

// nodeEnv is the platform's Node settings of every gateway it starts (runtime.GatewayNodeEnv).
func (r *Runtime) nodeEnv() map[string]string { return runtime.GatewayNodeEnv(r.opts.GatewayHeapMiB) }

// nodeEnvFor is nodeEnv with a heap of heapMiB (an agent's memory limit's; 0: the default).
func (r *Runtime) nodeEnvFor(heapMiB int64) map[string]string {
	if heapMiB <= 0 {
		return r.nodeEnv()
	}
	return runtime.GatewayNodeEnv(heapMiB)
}

// AgentDir is where the runtime keeps the agent with key.
func (r *Runtime) AgentDir(key types.NamespacedName) string {
	return filepath.Join(r.opts.StateDir, "agents", key.Namespace, key.Name)
}

// agentFor returns the agent's entry, creating it (and its supervisor) when create is set.
func (r *Runtime) agentFor(key types.NamespacedName, create bool) (*agent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errShutdown
	}
	a := r.agents[key]
	if a == nil && create {
		a = r.newAgent(key)
		r.agents[key] = a
		go a.supervise()
	}
	return a, nil
}

func keyOf(ag *agentsv1.Agent) types.NamespacedName {
	return types.NamespacedName{Namespace: ag.Namespace, Name: ag.Name}
}

// Delete implements runtime.Runtime: the gateway is stopped and the agent dir removed.
func (r *Runtime) Delete(ctx context.Context, ag *agentsv1.Agent) error {
	key := keyOf(ag)
	r.dropReservationOf(key, "its agent was deleted")
	r.mu.Lock()
	a := r.agents[key]
	delete(r.agents, key)
	r.releasePortsLocked(key)
	r.killExecsLocked(key)
	r.mu.Unlock()
	dir := r.AgentDir(key)
	st, err := readState(dir)
	if a != nil {
		a.close(ctx, true)
		a.mu.Lock()
		if a.loaded {
			st, err = a.st, nil
		}
		a.mu.Unlock()
	} else if err == nil && st.PID > 0 {
		// Not adopted (the runtime never saw it run), but maybe still ours.
		if p := r.adoptable(dir, st); p != nil {
			stopProcess(ctx, p, r.opts.StopTimeout, nil)
		}
	}
	r.endStragglers(ctx, filepath.Join(dir, homeDirName))
	if err := removeHomeDir(dir); err != nil {
		return fmt.Errorf("remove agent dir: %w", err)
	}
	r.releaseUIDs(dir)
	// The home of a claimed warm gateway lives in its member dir.
	if home := homeOf(dir, st); err == nil && home != filepath.Join(dir, homeDirName) {
		r.endStragglers(ctx, home)
		if err := removeHomeDir(filepath.Dir(home)); err != nil {
			return fmt.Errorf("remove agent home: %w", err)
		}
		r.releaseUIDs(filepath.Dir(home))
	}
	return nil
}

// Shutdown stops supervising. Unless KeepRunningOnShutdown is set every gateway is stopped
// (SIGTERM, SIGKILL after StopTimeout or when ctx ends). The Runtime is unusable afterwards.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	all := make([]*agent, 0, len(r.agents))
	for _, a := range r.agents {
		all = append(all, a)
	}
	for pid := range r.execs {
		killGroup(pid) // commands die with their manager
	}
	r.mu.Unlock()
	r.shutdownPools()
	r.ccStop()
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.close(ctx, !r.opts.KeepRunningOnShutdown)
		}()
	}
	wg.Wait()
	r.poolWG.Wait()
	r.ccWG.Wait()
	r.lazyWG.Wait()
	if r.cg != nil {
		// Gateways this runtime adopted (a manager before it started them) are in cgroups
		// it did not make: those are its to remove too (once empty; kept running, they stay).
		for _, a := range all {
			a.mu.Lock()
			home := a.home
			a.mu.Unlock()
			if home == "" {
				continue
			}
			if uid, err := r.sbx.uids.of(home); err == nil {
				r.cg.track(uid)
			}
		}
		r.cg.sweep(ctx, !r.opts.KeepRunningOnShutdown)
	}
	if !r.opts.KeepRunningOnShutdown {
		// No gateway runs on them any more: the homes' volumes are unmounted (their images
		// stay, and are mounted again by the next manager).
		for _, home := range mountedHomes(r.opts.StateDir) {
			if err := detachHome(home); err != nil {
				r.opts.Log.Error(err, "cannot unmount a home's volume", "home", home)
			}
		}
	}
	_ = os.Remove(filepath.Join(r.opts.StateDir, poolDirName)) // when empty
	r.mu.Lock()
	if r.lock != nil {
		r.lock.Close() // releases the flock
		r.lock = nil
	}
	r.mu.Unlock()
	return ctx.Err()
}

// lockStateDir takes an exclusive flock on <dir>/runtime.lock: two managers supervising the
// same agents would fight over their gateways.
func lockStateDir(dir string) (*os.File, error) {
	f, err := tryLock(filepath.Join(dir, "runtime.lock"), os.O_RDWR|os.O_CREATE)
	var open *fs.PathError
	if err != nil && !errors.As(err, &open) { // the lock, not the file
		return nil, fmt.Errorf("local runtime: %s is used by another manager: %w", dir, err)
	}
	return f, err
}

// tryLock opens path (with flag) and takes an exclusive flock on it without waiting: the
// lock lasts as long as the returned file is open, and goes with its holder's death.
func tryLock(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// trackExec registers a running Exec command's process group for key and returns the
// function that forgets it. After Shutdown the command is killed at once.
func (r *Runtime) trackExec(key types.NamespacedName) func(pid int) func() {
	return func(pid int) func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			killGroup(pid)
			return func() {}
		}
		r.execs[pid] = key
		return func() {
			r.mu.Lock()
			delete(r.execs, pid)
			r.mu.Unlock()
		}
	}
}

// execsOf counts the commands running in the agent with key.
func (r *Runtime) execsOf(key types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.execs {
		if k == key {
			n++
		}
	}
	return n
}

// killExecsLocked kills the running Exec commands of key.
func (r *Runtime) killExecsLocked(key types.NamespacedName) {
	for pid, k := range r.execs {
		if k == key {
			killGroup(pid)
		}
	}
}

// engineVersion is the version the engine in dir reports (run once per dir and cached);
// fallback when it cannot be run.
func (r *Runtime) engineVersion(ctx context.Context, dir, home, fallback string) string {
	r.verMu.Lock()
	defer r.verMu.Unlock()
	if v, ok := r.versions[dir]; ok {
		return v
	}
	if t, failed := r.verFail[dir]; failed && time.Since(t) < versionRetry {
		return fallback
	}
	cmd := r.opts.Engine.VersionCommand()
	// The engine dir as a plain read-only path: the compile cache's key needs the version
	// (verMu is held).
	bin, args, err := r.inSandbox(sandboxSpec{home: home, dir: home, binary: engineBinary(dir), args: cmd.Args, dieWithParent: true, readOnly: []string{dir}}, "", false)
	if err != nil {
		r.verFail[dir] = time.Now()
		return fallback
	}
	res, err := runCommand(ctx, commandSpec{
		path: bin, args: args, dir: home, sandboxed: r.sbx != nil,
		env:     mergeEnv(baseEnv(dir), r.opts.Engine.Env(home, 0), cmd.Env),
		timeout: cmd.Timeout, maxOutput: 64 << 10,
	})
	if err == nil && res.ExitCode == 0 {
		if v, perr := r.opts.Engine.ParseVersion(res.Stdout); perr == nil {
			r.versions[dir] = v
			return v
		}
	}
	r.verFail[dir] = time.Now()
	r.opts.Log.Info("cannot read the engine version", "engineDir", dir, "error", err, "exitCode", res.ExitCode)
	return fallback
}

// cachedVersion is engineVersion without running anything.
func (r *Runtime) cachedVersion(dir, fallback string) string {
	r.verMu.Lock()
	defer r.verMu.Unlock()
	if v, ok := r.versions[dir]; ok {
		return v
	}
	return fallback
}

// engineBinary is the engine CLI in an engine dir.
func engineBinary(dir string) string { return filepath.Join(dir, "bin", "openclaw") }
