package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
)

// Platform is an embedded platform as the fleet benchmarks run it: the envtest control plane,
// a fake model provider, and the platform on the local runtime with its shipped defaults as
// root (the sandbox, CRIU checkpoints, gateway templates), its model proxy pointed at the fake
// provider and its channel relay at the benchmark's fake channels, its agents trusting
// $NODE_EXTRA_CA_CERTS as agentplane's own default does. Its log is written to
// LogPath (timestamps to the nanosecond: a wake's steps are milliseconds apart), kept when
// the run fails.
type Platform struct {
	// Client calls the facade as the owner of the benchmark's workspace.
	Client Client
	// Version is the pinned engine's version; State the runtime's state dir.
	Version, State string
	// AvailBefore is the machine's available memory (MiB) before the platform started (the
	// control plane and the fake provider already up).
	AvailBefore float64
	LogPath     string

	env     *kubeenv.Env
	llm     *providertest.Provider
	p       *platform.Embedded
	logFile *os.File
}

// StartPlatform starts the control plane, the fake provider and the platform for the
// benchmark name (its workspace and its state and log files are named after it), its channel
// relay at relay; tune, if any, changes the runtime's options (a setting the benchmark
// compares with the shipped default). Stop ends them.
func StartPlatform(ctx context.Context, name string, relay platform.ChannelRelayOptions, tune ...func(*platform.RuntimeOptions)) (_ *Platform, err error) {
	engineDir, version, err := Engine()
	if err != nil {
		return nil, err
	}
	BinEnv(local.CRIUEnv, "criu")
	BinEnv(local.ReseedEnv, local.ReseedName)
	b := &Platform{Version: version}
	defer func() {
		if err != nil {
			b.Stop(err)
		}
	}()
	if b.logFile, err = os.CreateTemp("", "agentplane-bench-"+name+"-*.log"); err != nil {
		return nil, err
	}
	b.LogPath = b.logFile.Name()
	if b.env, err = kubeenv.Start(); err != nil {
		return nil, err
	}
	b.llm = providertest.New()
	if b.State, err = os.MkdirTemp("", "agentplane-bench-"+name+"-"); err != nil {
		return nil, err
	}
	b.AvailBefore = MemAvailableMiB()
	rt := platform.RuntimeOptions{Name: platform.RuntimeLocal, StateDir: b.State, Sandbox: local.SandboxAuto,
		EngineDirs: map[string]string{version: engineDir}, GatewayTemplates: true,
		// As agentplane's --agent-ca-file defaults: behind an egress that intercepts TLS,
		// the agents' plugin installs from the registry need its CA.
		CAFile: os.Getenv("NODE_EXTRA_CA_CERTS")}
	for _, t := range tune {
		t(&rt)
	}
	b.p, err = platform.RunEmbedded(ctx, b.env.Config, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0", Log: zap.New(zap.WriteTo(b.logFile), func(o *zap.Options) {
			o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder
			if keepLog() {
				o.Level = zapcore.DebugLevel // V(1): the relay's calls by method, among others
			}
		}),
		Runtime:          rt,
		ProvisionTimeout: 5 * time.Minute,
		ModelProxy:       platform.ModelProxyOptions{Upstreams: map[string]string{"anthropic": b.llm.URL}},
		ChannelRelay:     relay,
	})
	if err != nil {
		return nil, err
	}
	for _, check := range []func() (bool, string){b.p.Checkpoints, b.p.Templates} {
		if ok, why := check(); !ok {
			return nil, fmt.Errorf("the shipped defaults need CRIU and gateway templates here (root, make sandbox-packages): %s", why)
		}
	}
	// The agents are to be born from the template, which the runtime makes on first use:
	// the first agents of a run would otherwise start cold while it is made.
	took, err := WaitTemplate(ctx, func() (bool, string) { return b.p.TemplateReady(version) })
	if err != nil {
		return nil, err
	}
	fmt.Printf("the engine's template is ready (%s)\n", took.Round(time.Second))
	tok, err := platform.OwnerToken(ctx, b.env.Client, b.p.Signer, name, name[:1], name)
	if err != nil {
		return nil, err
	}
	b.Client = Client{Base: b.p.URL, Token: tok}
	return b, nil
}

// Stop stops the platform, the fake provider and the control plane, and removes the state
// dir; the log is removed too unless the run failed (runErr not nil) or keepLog, when its
// path is printed.
func (b *Platform) Stop(runErr error) {
	if b.p != nil {
		_ = b.p.Stop()
	}
	if b.llm != nil {
		b.llm.Close()
	}
	if b.env != nil {
		_ = b.env.Stop()
	}
	if b.State != "" {
		if keepLog() && b.logFile != nil {
			keepGatewayLogs(b.State, b.LogPath+".gateways")
		}
		_ = os.RemoveAll(b.State)
	}
	if b.logFile == nil {
		return
	}
	_ = b.logFile.Close()
	if runErr == nil && !keepLog() {
		_ = os.Remove(b.LogPath)
		return
	}
	fmt.Fprintln(os.Stderr, "the platform's log:", b.LogPath)
}

// keepLog: $AGENTPLANE_BENCH_KEEP_LOG keeps the platform's log, at debug level, and the
// agents' gateway logs (in a dir beside it), for a look at where a run's time went.
func keepLog() bool { return os.Getenv("AGENTPLANE_BENCH_KEEP_LOG") != "" }

// keepGatewayLogs copies each agent's gateway.log under state into dir as <namespace>_<name>.log.
func keepGatewayLogs(state, dir string) {
	logs, _ := filepath.Glob(filepath.Join(state, "agents", "*", "*", "gateway.log"))
	if len(logs) == 0 || os.MkdirAll(dir, 0o700) != nil {
		return
	}
	for _, l := range logs {
		agent := filepath.Dir(l)
		if b, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(dir, filepath.Base(filepath.Dir(agent))+"_"+filepath.Base(agent)+".log"), b, 0o600)
		}
	}
}
