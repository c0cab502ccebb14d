// Package runtime decides where agents run. A Runtime keeps an agent's gateway in the state the
// Agent controller asks for, reports what it observes, and runs commands and file operations
// in the agent's home. Implementations: kube (a StatefulSet per agent) and local (a process
// per agent on this host).
package runtime

import (
	"context"
	"errors"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
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
	Identity Identity
	// Stopped asks for no gateway at all (state kept).
	Stopped bool
	// RestartNonce changes whenever a restart is asked for.
	RestartNonce string
	// ConfigHash changes whenever something that needs a gateway restart changes.
	ConfigHash string
}

// Identity is the agent's display identity.
type Identity struct {
	Name, Description, Vibe, Emoji string
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
}

// ExecRequest runs a command in the agent's home.
type ExecRequest struct {
	// Argv is the command. With Engine set, Argv are engine CLI arguments and the runtime
	// runs the engine binary with the engine environment.
	Argv   []string
	Engine bool
	// Dir is the working directory relative to the agent's workspace ("" = the workspace).
	// It must exist and stay inside the workspace after resolving symlinks.
	Dir string
	// Env is added to the environment.
	Env map[string]string
	// Stdin, if set, is fed to the command.
	Stdin []byte
	// Timeout kills the whole process tree when reached (0 = DefaultExecTimeout).
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each, in bytes (0 = DefaultMaxOutput).
	MaxOutput int
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
}

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
