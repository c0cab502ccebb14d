package kube

import (
	"context"
	"io"
	"path"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Defaults for Options.
const (
	// DefaultImage is the gateway image; %s is replaced by the engine version.
	DefaultImage = "ghcr.io/openclaw/openclaw:%s"
	// DefaultTerminationGracePeriod lets the gateway drain (it exits within ~2 s on SIGTERM).
	DefaultTerminationGracePeriod = 30 * time.Second
	// GatewayPort is the port the gateway listens on and the Service exposes.
	GatewayPort = 18789
	// Home is the engine home in the pod: the image's `node` user home, where the PVC is mounted.
	Home = "/home/node"
	// FieldManager is the server-side apply field manager.
	FieldManager = "agentplane"
	// ImageProbe is where agentplane's own gateway image holds its health probe command
	// (cmd/agentplane-probe), for Options.Probe.
	ImageProbe = "/usr/local/bin/agentplane-probe"
)

// Default resources: an idle gateway holds about 1 GB (main process plus workers).
var (
	DefaultStorageSize   = resource.MustParse("5Gi")
	DefaultCPURequest    = resource.MustParse("500m")
	DefaultMemoryRequest = resource.MustParse("1536Mi")
	DefaultMemoryLimit   = resource.MustParse("2Gi")
	// EphemeralStorageLimit bounds what the gateway container writes outside its home volume
	// (its writable layer and logs; with the /tmp emptyDir's sizeLimit, the pod's): the kubelet
	// evicts a pod over it instead of letting it fill the node's disk.
	EphemeralStorageLimit = resource.MustParse("4Gi")
)

// DefaultEngineCommand runs the engine CLI in the official image (WORKDIR /app, no `openclaw`
// on PATH).
var DefaultEngineCommand = []string{"node", "/app/openclaw.mjs"}

// Options configure the kube Runtime.
type Options struct {
	// Client is the manager's (cached) client, used for writes and for reading StatefulSets and
	// Pods. The manager should restrict its Pod cache to `app.kubernetes.io/managed-by=agentplane`.
	Client client.Client
	// APIReader reads straight from the API server (the pod before an exec). Defaults to Client.
	APIReader client.Reader
	// RESTConfig is used for pods/exec.
	RESTConfig *rest.Config
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
	// Clientset is used to build pods/exec requests; built from RESTConfig when nil.
	Clientset kubernetes.Interface
	// Scheme knows the Agent kind (owner references).
	Scheme *k8sruntime.Scheme
	// Engine knows the engine's command line and files.
	Engine engine.Engine
	// Image is the gateway image template; %s is the engine version (DefaultImage).
	Image string
	// ImagePullPolicy of the gateway container ("" = the cluster default for the tag).
	ImagePullPolicy string
	// EngineCommand is the engine CLI in the image (DefaultEngineCommand); the gateway runs
	// EngineCommand + Engine.GatewayCommand().Args.
	EngineCommand []string
	// Init runs as PID 1 of the gateway container before EngineCommand (for example
	// ["/sbin/tini", "--"] in agentplane's own gateway image) and reaps the engine's child
	// processes; empty runs the engine as PID 1.
	Init []string
	// Probe, when set, is an exec probe command in the image (agentplane's gateway image:
	// [ImageProbe]) given the URL of the engine's probe route; it reads
	// the JSON body, which an HTTP probe cannot (the engine answers 200 to unknown paths).
	// Empty probes with HTTP GETs of the probe routes (the official image has no such command).
	Probe []string
	// StorageClass for the home volume ("" = the cluster default).
	StorageClass string
	// StorageSize of the home volume (DefaultStorageSize).
	StorageSize resource.Quantity
	// CPURequest, MemoryRequest, MemoryLimit, CPULimit of the gateway container. Zero values
	// take the defaults, except CPULimit (none by default).
	CPURequest, MemoryRequest, MemoryLimit, CPULimit resource.Quantity
	// TerminationGracePeriod of the pod (DefaultTerminationGracePeriod).
	TerminationGracePeriod time.Duration
	// NodeSelector and Tolerations of every gateway pod: they place the agents on a node pool
	// (a tainted pool needs both: the selector keeps the pods on it, the tolerations let
	// them in). Empty: wherever the scheduler puts them.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// RuntimeClassName of every gateway pod whose agent and workspace name none ("" = the
	// cluster's default runtime).
	RuntimeClassName string
	// SeccompProfile is the seccomp profile of every gateway pod, a file under the kubelet's
	// seccomp directory on each node (a Localhost profile: config/seccomp/agentplane-agent.json,
	// syscallpolicy.Profile); "" is the container runtime's default (RuntimeDefault, which lets
	// io_uring through before containerd 2).
	SeccompProfile string
	// Network is the default-deny NetworkPolicy of every gateway pod (Network.Enabled).
	Network NetworkOptions
}

// Runtime runs agents as StatefulSets. It implements runtime.Runtime.
type Runtime struct {
	opts   Options
	layout engine.Layout
	// exec streams a command into the gateway container; replaced in tests.
	exec execFunc
	// home is the engine home as commands in the pod see it (Home; a temp dir in tests).
	home string

	csOnce sync.Once
	cs     kubernetes.Interface
	csErr  error

	// recent remembers an agent's last apply until the cache shows it (client.ObjectKey of the StatefulSet ->
	// recentApply) so the pass right after it does not apply again.
	recent sync.Map
	// recentSwept is when expired entries of recent were last dropped (unix nanoseconds).
	recentSwept atomic.Int64
	// governing remembers when this runtime created a namespace's GoverningService (namespace
	// -> time.Time), so the agents that follow do not create it again while the cache lags.
	governing sync.Map
	// pools is what this process keeps of the warm pools (pool.go).
	pools pools
	// platform is PlatformRendering, computed once.
	platform string
}

var _ runtime.Runtime = (*Runtime)(nil)

// execFunc runs cmd in the gateway container of pod namespace/name. A non-zero exit is
// returned as a k8s.io/client-go/util/exec.ExitError.
type execFunc func(ctx context.Context, namespace, pod string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error

// New returns a Runtime with defaults filled in.
func New(opts Options) *Runtime {
	opts = opts.withDefaults()
	r := &Runtime{opts: opts, home: Home}
	if opts.Engine != nil {
		r.layout = opts.Engine.Layout()
	}
	r.exec = r.podExec
	r.platform = r.PlatformRendering()
	return r
}

// withDefaults fills in every unset option that has a default.
func (o Options) withDefaults() Options {
	if o.APIReader == nil && o.Client != nil {
		o.APIReader = o.Client
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if len(o.EngineCommand) == 0 {
		o.EngineCommand = DefaultEngineCommand
	}
	if o.StorageSize.IsZero() {
		o.StorageSize = DefaultStorageSize
	}
	if o.CPURequest.IsZero() {
		o.CPURequest = DefaultCPURequest
	}
	if o.MemoryRequest.IsZero() {
		o.MemoryRequest = DefaultMemoryRequest
	}
	if o.MemoryLimit.IsZero() {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.TerminationGracePeriod <= 0 {
		o.TerminationGracePeriod = DefaultTerminationGracePeriod
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Name is "kube".
func (r *Runtime) Name() string { return "kube" }

// workspace is the agent's home as commands in the pod see it.
func (r *Runtime) workspace() string { return path.Join(r.home, r.layout.WorkspaceDir) }

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
