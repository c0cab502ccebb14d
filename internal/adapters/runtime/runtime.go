// Package runtime decides where agents run. A Runtime keeps an agent's gateway in the state the
// Agent controller asks for, reports what it observes, and runs commands and file operations
// in the agent's home. Implementations: kube (a StatefulSet per agent) and local (a process
// per agent on this host).
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Phase is what the runtime observes of a gateway.
type Phase string

const (
	// PhaseStarting: provisioned, the gateway is booting (not yet healthy).
	PhaseStarting Phase = "Starting"
	// PhaseRunning: the gateway answers its health check.
	PhaseRunning Phase = "Running"
	// PhaseCrashed: the gateway exited or failed to start; Reason/Message say why.
	PhaseCrashed Phase = "Crashed"
	// PhaseStopped: no gateway runs, as asked.
	PhaseStopped Phase = "Stopped"
)

// Desired is what the controller wants of an agent's gateway.
type Desired struct {
	// EngineVersion to run.
	EngineVersion string
	// GatewayToken authenticates clients of the gateway.
	GatewayToken string
	// GatewayTokenSecret names the core Secret that holds GatewayToken (kube runtime).
	GatewayTokenSecret string
	// Env is extra environment (attached secrets, channel tokens), by variable name.
	Env map[string]string
	// EnvSecret names the core Secret that holds Env (kube runtime: envFrom).
	EnvSecret string
	// Identity of the agent, for the initial engine config.
	Identity engine.Identity
	// Stopped asks for no gateway at all (state kept).
	Stopped bool
	// Suspended, with Stopped, says the gateway stops because the agent sleeps: a runtime
	// that can keep the gateway's process state over the sleep (a checkpoint) does, and
	// restores it when the agent wakes.
	Suspended bool
	// RestartNonce changes whenever a restart is asked for.
	RestartNonce string
	// RuntimeClassName of the gateway pod: the agent's own, else its workspace's ("" = the
	// platform's default). Kube runtime; the local runtime ignores it.
	RuntimeClassName string
	// Egress names what the agent talks to outside the cluster: the model providers it holds
	// a key of itself (not served by the model proxy) and the types of its Channels, sorted.
	// The kube runtime opens egress to the addresses the platform configured for them.
	Egress []string
	// AllowedRendering lets a gateway that runs an outdated rendering restart onto the
	// rendering it names (Observed.Rendering), when only the platform's rendering of the
	// gateway changed: a rollout's wave sets it (kube runtime; "" allows none, and such a
	// gateway keeps running until it restarts for another reason).
	AllowedRendering string
}

// Observed is what the runtime sees.
type Observed struct {
	Phase Phase
	// Reason is a CamelCase reason for conditions; Message is for humans.
	Reason, Message string
	// Endpoint is the gateway's base URL.
	Endpoint string
	// EngineVersion is the version actually running.
	EngineVersion string
	// Restarts counts crashes since the agent was provisioned.
	Restarts int32
	// Since is when the gateway entered Phase.
	Since time.Time
	// ClaimedFrom is set by the Ensure that gave a new agent a warm gateway of a pool
	// ("<pool>/<member>"), for an event; empty otherwise (a cold start, or any later Ensure).
	ClaimedFrom string
	// Rendering names how this manager renders the agent's gateway (kube runtime; "" on a
	// runtime without renderings): "<platform rendering>.<digest>", the platform rendering
	// naming the manager's rendering of every gateway (PlatformRenderer).
	Rendering string
	// RenderingOutdated: the gateway runs another rendering than Rendering (a pod made by an
	// earlier manager) and keeps running it until a rollout allows the restart
	// (Desired.AllowedRendering) or it restarts for another reason.
	RenderingOutdated bool
}

// PlatformRenderer is a runtime whose gateways run a rendering of the manager's (the kube
// runtime's pods): PlatformRendering names this manager's, the prefix of every
// Observed.Rendering it reports.
type PlatformRenderer interface {
	PlatformRendering() string
}

// ExecRequest runs a command in the agent's home.
type ExecRequest struct {
	// Argv is the command. With Engine set, Argv are engine CLI arguments and the runtime
	// runs the engine binary with the engine environment.
	Argv   []string
	Engine bool
	// Dir is the working directory relative to the home's workspace directory ("" = that
	// directory).
	// It must exist and stay inside the home's workspace directory after resolving symlinks.
	Dir string
	// Env is added to the environment.
	Env map[string]string
	// Stdin, if set, is fed to the command.
	Stdin []byte
	// StdinFile, if set, gives the command Stdin as a file instead of on its standard input:
	// in a fresh private directory outside the agent's home (mktemp -d where the command runs:
	// the pod's /tmp, the host's or sandbox's temporary directory), named by StdinFile.Env,
	// removed when the command ends. Nothing of the agent's own files is touched.
	StdinFile *StdinFile
	// Timeout kills the whole process tree when reached (0 = DefaultExecTimeout).
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each, in bytes (0 = DefaultMaxOutput).
	MaxOutput int
	// Network: the command reaches out (a registry) and runs only where it has the agent's
	// way out; ErrNotRunning when the runtime cannot give it one now (local, in network
	// namespaces: the gateway is down, and a command run then has no network at all).
	Network bool
}

// StdinFile names the file ExecRequest.StdinFile makes of Stdin.
type StdinFile struct {
	// Env is the environment variable the command finds the file's path in.
	Env string
	// Name is the file's base name.
	Name string
}

// stdinFileScript: $1 variable, $2 file name, then the command. It writes its standard input
// into $d/$2 of a new private directory, exports $1=$d/$2, runs the command (which reads no
// standard input) and removes the directory when it ends or is interrupted.
const stdinFileScript = `umask 077
var=$1 name=$2
shift 2
d=$(mktemp -d) || exit 125
trap 'rm -rf -- "$d"' EXIT
trap 'exit 143' HUP INT TERM
cat > "$d/$name" || exit 125
export "$var=$d/$name"
"$@" </dev/null
`

var (
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	fileNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
)

// WrapStdinFile is argv run through the shell script that implements ExecRequest.StdinFile;
// a runtime runs it where it would have run argv (the shell must be on the command's PATH).
func WrapStdinFile(f *StdinFile, argv []string) ([]string, error) {
	if !envNameRE.MatchString(f.Env) || !fileNameRE.MatchString(f.Name) {
		return nil, fmt.Errorf("%w: invalid stdin file %q=%q", ErrExec, f.Env, f.Name)
	}
	return append([]string{"sh", "-c", stdinFileScript, "agentplane-stdin-file", f.Env, f.Name}, argv...), nil
}

// ExecResult is what a command did. A non-zero exit is a result, not an error.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int
	TimedOut       bool
	Truncated      bool
}

// Defaults for ExecRequest.
const (
	DefaultExecTimeout = 60 * time.Second
	DefaultMaxOutput   = 1 << 20
)

// Errors callers map to HTTP answers.
var (
	// ErrInvalidPath: a path or working directory is missing or escapes the allowed root.
	ErrInvalidPath = errors.New("invalid path")
	// ErrNotFound: the file does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNotRunning: the agent has no running gateway / pod to run commands in.
	ErrNotRunning = errors.New("agent not running")
	// ErrNoSpace: the agent's home is full (its size limit, or its volume's): the write
	// failed and the home is as it was.
	ErrNoSpace = errors.New("no space left in the agent's home")
	// ErrExec: the command could not be run at all.
	ErrExec = errors.New("exec failed")
	// ErrUnavailable: what runs the command (the API server, the pod's exec stream) could
	// not be reached; callers answer it as an unavailable dependency, not a failed command.
	ErrUnavailable = errors.New("runtime unavailable")
)

// Runtime runs agents somewhere.
type Runtime interface {
	// Name is "kube" or "local".
	Name() string
	// Ensure converges the agent's gateway to d and reports what it observes. It is
	// idempotent and cheap when nothing changes.
	Ensure(ctx context.Context, agent *agentsv1.Agent, d Desired) (Observed, error)
	// Delete stops the gateway and removes everything the runtime keeps for the agent.
	Delete(ctx context.Context, agent *agentsv1.Agent) error
	// Exec runs a command in the agent's home.
	Exec(ctx context.Context, agent *agentsv1.Agent, req ExecRequest) (ExecResult, error)
	// ReadFile reads a file relative to the agent's home.
	ReadFile(ctx context.Context, agent *agentsv1.Agent, path string) ([]byte, error)
	// WriteFile writes a file relative to the agent's home atomically (never half-written).
	WriteFile(ctx context.Context, agent *agentsv1.Agent, path string, data []byte) error
	// ArchiveWorkspace writes the workspace as a tar stream to w.
	ArchiveWorkspace(ctx context.Context, agent *agentsv1.Agent, w io.Writer) error
	// RestoreWorkspace replaces the workspace with the tar stream r.
	RestoreWorkspace(ctx context.Context, agent *agentsv1.Agent, r io.Reader) error
	// Logs reads the gateway's output (stdout and stderr) as lines, as written: callers
	// redact. It never starts or wakes a gateway. Without req.Follow it returns the last
	// req.Tail lines, oldest first (none when the runtime keeps no output for the agent).
	// With req.Follow it calls Follow with those lines and then with every line written
	// after, and returns nil once ctx ends or Follow returns false, io.EOF once the output
	// ended for good (the agent's output removed, its pod gone or its container exited) and
	// ErrNotRunning when there is no output to follow (no pod).
	Logs(ctx context.Context, agent *agentsv1.Agent, req LogRequest) ([]string, error)
}

// LogRequest asks Runtime.Logs for an agent's gateway output.
type LogRequest struct {
	// Tail is how many of the last lines to read (at least 1).
	Tail int
	// Since, when set, leaves out lines written before it: kube asks the API server for them;
	// local, which cannot tell when a line was written, sends no tail lines at all. A follower
	// that follows again after its output ended sets it.
	Since time.Time
	// Follow, when set, receives the lines (see Runtime.Logs). It is called from one
	// goroutine and must not block for long: the runtime reads the output for this caller
	// alone, so a slow Follow only delays its own lines, never the gateway.
	Follow func(line string) bool
}

// MaxLogLine is the longest line Logs returns: longer ones are split.
const MaxLogLine = 16 << 10

// Watcher is a Runtime whose objects or notifications must wake the Agent controller (a pod
// changed, a local process exited). The Agent controller adds the runtime's watches to its
// builder itself, so the platform and the tests wire the same ones.
type Watcher interface {
	// SetupWatches adds the runtime's watches to the Agent controller's builder b.
	SetupWatches(b *builder.Builder) *builder.Builder
}

// Notifier is told when something the runtime observes changes outside a reconcile (a local
// process exited, became healthy). The controller turns it into a reconcile request.
type Notifier func(agent types.NamespacedName)

// Pooler is a Runtime that keeps warm pools of booted, idle gateways (GatewayPool). Ensure of
// a new agent that needs nothing a running gateway cannot take without a restart claims a
// ready member of a pool of its engine version instead of starting a gateway cold, and the
// pool refills in the background. No member ever serves two agents.
type Pooler interface {
	// SetPool makes the pool name keep spec.Size gateways of spec.Version booted (size <= 0:
	// none, the pool's counters are kept). A new version replaces every member. It returns
	// an error when the version is not installed, and ErrPoolNoNamespaces when the runtime
	// keeps members per namespace and spec names none.
	SetPool(ctx context.Context, name string, spec PoolSpec) error
	// RemovePool stops the pool's members and forgets the pool.
	RemovePool(name string)
	// PoolStatus is what the runtime observes of the pool (the zero value for an unknown one).
	PoolStatus(name string) PoolStatus
	// SetupPoolWatches makes the GatewayPool controller's builder b reconcile a pool whenever
	// its members change (booted, crashed, claimed).
	SetupPoolWatches(b *builder.Builder) *builder.Builder
}

// PoolSpec is what a pool should keep (Pooler.SetPool).
type PoolSpec struct {
	// Version is the engine version of the members.
	Version string
	// Size is how many members to keep booted: per namespace on a runtime whose members live
	// in the namespaces of the agents that claim them (kube), in all otherwise (local).
	Size int
	// Namespaces keep Size members each (kube: pods and volumes cannot move between
	// namespaces). The local runtime ignores them.
	Namespaces []string
}

// ErrPoolNoNamespaces: the runtime keeps members in the agents' namespaces and the pool
// names none, so it keeps no member.
var ErrPoolNoNamespaces = errors.New("the pool names no namespace to keep its gateways in")

// GatewayReserver is a Pooler whose warm gateways can be reserved for a new agent before its
// gateway token exists: the agent adopts the reserved gateway's own token (random, made by the
// platform for that gateway and never given to anyone), so its first Ensure claims a gateway
// that already serves the agent's token and waits for no config reload.
//
// A reservation belongs to that agent alone. The agent's first Ensure takes it (Observed
// says which member in ClaimedFrom); an Ensure that cannot use it (the agent is stopped or
// needs environment of its own), Delete, or a reservation left unused past the runtime's
// bound discards the gateway: it is stopped and never handed to another agent, since its
// token is the agent's now.
type GatewayReserver interface {
	// ReserveGateway sets a ready warm gateway of the engine version aside for agent and
	// returns its gateway token, which becomes the agent's. ok is false when no pool of the
	// version has a ready gateway (or the agent is not new): the agent gets a fresh token.
	// Calling it again for the same agent returns the same reservation.
	ReserveGateway(ctx context.Context, agent *agentsv1.Agent, version string) (token string, ok bool, err error)
}

// PoolStatus is a pool as the runtime sees it.
type PoolStatus struct {
	// Version is the engine version of the members; Size the number asked for.
	Version string
	Size    int
	// Ready members answer their health check and can be claimed; Booting ones do not yet.
	Ready, Booting int
	// Claimed counts the members claimed since the pool was first set in this process.
	Claimed int64
	// Failures counts the members that crashed or never became healthy in a row (reset when
	// one becomes healthy); LastFailure says what happened to the last one.
	Failures    int32
	LastFailure string
	// RetryAt is when the next member is started after failures (zero: no backoff).
	RetryAt time.Time
	// Claims are the most recent claims, oldest first (at most PoolClaimsKept).
	Claims []PoolClaim
}

// PoolClaimsKept is how many recent claims PoolStatus reports.
const PoolClaimsKept = 256

// PoolClaim is one member handed to an agent.
type PoolClaim struct {
	// Seq numbers the pool's claims from 1.
	Seq    int64
	Member string
	Agent  types.NamespacedName
	At     time.Time
	// Latency is from the start of the claim until the gateway served the agent's token.
	Latency time.Duration
}

// Home is an agent's home as a runtime keeps it, found by Inventory.Homes.
type Home struct {
	// Namespace and Name are the agent's: a runtime keeps homes by the agent's namespace and
	// name (never its UID), so an Agent re-created with the same name finds its home again.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Location says where it is, for humans: the local runtime's directory, the kube
	// runtime's PersistentVolumeClaim.
	Location string `json:"location"`
}

// Inventory is a Runtime that can list the homes it keeps, whether or not an Agent names them
// (`agentplane doctor` compares them with the Agents after a restore).
type Inventory interface {
	// Homes lists every agent home the runtime keeps, sorted by namespace and name.
	Homes(ctx context.Context) ([]Home, error)
}

// Meter is a Runtime that can tell what agents' gateways use now (the local runtime's cgroups,
// the kube runtime's metrics API when the cluster serves it).
type Meter interface {
	// Usage measures agents, all of namespace, now: each agent the runtime can measure has an
	// entry under its name; the others (no gateway of theirs runs here, no cgroups, no
	// metrics API) read as not available. It is one call for many agents: a runtime reads
	// what it needs once per call, not once per agent.
	Usage(ctx context.Context, namespace string, agents []*agentsv1.Agent) map[string]ResourceUsage
}

// ResourceUsage is an agent's memory and CPU as its runtime measures them.
type ResourceUsage struct {
	// MemoryBytes is the memory in use now; MemoryLimitBytes its limit (0: none known).
	MemoryBytes, MemoryLimitBytes int64
	// CPUSeconds is the CPU time used since the cgroup was made (a rate needs two samples);
	// CPUKnown is false when the runtime cannot read it (a v1 host without cpuacct beside cpu).
	CPUSeconds float64
	CPUKnown   bool
	// CPUCores is a rate the runtime measured itself (the metrics API's, over its window), in
	// cores; CPURateKnown says it is set.
	CPUCores     float64
	CPURateKnown bool
}
