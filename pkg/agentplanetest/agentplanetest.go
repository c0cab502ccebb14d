// Package agentplanetest runs agentplane inside a test: its controllers and its REST facade in
// the test's own process, on the test's control plane (envtest, or a real cluster), with a fast
// engine double in place of the OpenClaw gateway. It is for teams whose own code creates or
// reads agentplane objects (Agents, Workspaces, ...) and wants to test against the real thing.
//
//	env := agentplanetest.NewEnvironment() // or &envtest.Environment{CRDs: crd.MustCRDs()}
//	cfg, _ := env.Start()
//	p, _ := agentplanetest.Start(ctx, cfg)
//	defer p.Stop()
//	tok, _ := p.Token("team-a") // the workspace team-a, its namespace, a token with every scope
//
// Agents run as local processes of the engine double (see docs/TESTING.md for what it does and
// does not do); WithEngineDirs selects the real engine when it is installed. Platforms started
// on one API server in one process share one running platform, reference counted (agentplane's
// controllers are cluster-wide: two copies would reconcile every Agent twice), so parallel
// tests each call Start and Stop, and each uses a workspace of its own.
package agentplanetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/config/policy"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw/program"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/scheme"
)

// FakeEngineVersion is the engine version the double is offered as (the openclaw release whose
// command line it copies); Agents that name no version get it.
const FakeEngineVersion = program.PinnedVersion

// TokenUser is the user id of the tokens Token mints (the owner of their workspace).
const TokenUser = "agentplanetest"

// Option adjusts Start.
type Option func(*options)

type options struct {
	engineDirs       []string
	provisionTimeout time.Duration
	clawHubURL       string
	modelUpstreams   map[string]string
	modelPrices      string
	log              *logr.Logger
}

// WithEngineDirs runs agents on the real engine: OpenClaw install dirs with bin/openclaw (as
// `make engine` installs them), each offered under the version it reports.
func WithEngineDirs(dirs ...string) Option {
	return func(o *options) { o.engineDirs = append(o.engineDirs, dirs...) }
}

// WithProvisionTimeout bounds how long the facade's agent create and restart wait for the
// gateway (default 60s; the double boots in about 0.1s, the real engine in about 10s).
func WithProvisionTimeout(d time.Duration) Option {
	return func(o *options) { o.provisionTimeout = d }
}

// WithClawHubURL is the skill registry that skill installs (POST /v0/clawhub/{slug}/install)
// download from: a test double of ClawHub, say (default: https://clawhub.ai, on the network).
func WithClawHubURL(url string) Option {
	return func(o *options) { o.clawHubURL = url }
}

// WithModelProviders points the platform's model proxy at fake model providers (provider ->
// origin, such as "openai" -> a test server's URL): agents that hold a provider's key call it
// through the proxy, which meters their usage and enforces their budgets (default: the
// providers' real origins).
func WithModelProviders(upstreams map[string]string) Option {
	return func(o *options) {
		if o.modelUpstreams == nil {
			o.modelUpstreams = map[string]string{}
		}
		for k, v := range upstreams {
			o.modelUpstreams[k] = v
		}
	}
}

// WithModelPrices prices the model proxy's requests by the price table in file (as the
// manager's --model-prices): usage then carries a cost in the table's currency.
func WithModelPrices(file string) Option {
	return func(o *options) { o.modelPrices = file }
}

// WithLogger sets the platform's logger (default: controller-runtime's, ctrl.Log). A logger
// bound to one test (testr) must not outlive it: the platform is shared until its last Stop.
func WithLogger(l logr.Logger) Option {
	return func(o *options) { o.log = &l }
}

// fingerprint is what two Starts on one API server must agree on.
func (o options) fingerprint() string {
	return fmt.Sprintf("engines=%q provision=%s clawhub=%q models=%v prices=%q", o.engineDirs, o.provisionTimeout, o.clawHubURL, o.modelUpstreams, o.modelPrices)
}

// Platform is a handle on agentplane running in this process. Its methods are safe for
// concurrent use.
type Platform struct {
	s        *shared
	stopOnce sync.Once
	stopErr  error
}

// shared is the one running platform of an API server.
type shared struct {
	key, fingerprint string
	refs             int
	emb              *platform.Embedded
	client           client.Client
	conns            *connrotation.Dialer
	stateDir         string
}

var (
	mu      sync.Mutex
	running = map[string]*shared{}
)

// Start runs agentplane on the API server of cfg: it installs the CRDs that are absent and the
// admission policies shipped with them (config/policy; none on an API server before Kubernetes
// 1.36), then starts the controllers and the REST facade (on 127.0.0.1, a free port) in this process, and
// returns once the facade answers. A second Start on the same API server (same cfg.Host) while
// the first runs returns another handle on the same platform; it fails when its options differ.
func Start(ctx context.Context, cfg *rest.Config, opts ...Option) (*Platform, error) {
	o := options{provisionTimeout: 60 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	mu.Lock()
	defer mu.Unlock()
	if s := running[cfg.Host]; s != nil {
		if s.fingerprint != o.fingerprint() {
			return nil, fmt.Errorf("agentplanetest: a platform with other options already runs on %s (%s; asked for %s)", cfg.Host, s.fingerprint, o.fingerprint())
		}
		s.refs++
		return &Platform{s: s}, nil
	}
	s, err := start(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	running[cfg.Host] = s
	return &Platform{s: s}, nil
}

func start(ctx context.Context, cfg *rest.Config, o options) (_ *shared, err error) {
	s := &shared{key: cfg.Host, fingerprint: o.fingerprint(), refs: 1}
	// Every connection of this platform goes through one dialer, so that the last Stop closes
	// them all (client-go would otherwise keep idle ones, and their goroutines, in a cache).
	cfg = rest.CopyConfig(cfg)
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	s.conns = connrotation.NewDialer(dial)
	cfg.Dial = s.conns.DialContext
	defer func() {
		if err != nil {
			s.conns.CloseAll()
			if s.stateDir != "" {
				os.RemoveAll(s.stateDir)
			}
		}
	}()
	if err := installCRDs(ctx, cfg); err != nil {
		return nil, err
	}
	if err := policy.Install(ctx, cfg); err != nil {
		return nil, fmt.Errorf("agentplanetest: install the admission policies: %w", err)
	}
	if s.client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	if s.stateDir, err = os.MkdirTemp("", "agentplanetest-"); err != nil {
		return nil, err
	}
	po, err := platformOptions(ctx, o, s.stateDir)
	if err != nil {
		return nil, err
	}
	if s.emb, err = platform.RunEmbedded(context.WithoutCancel(ctx), cfg, po); err != nil {
		return nil, fmt.Errorf("agentplanetest: start the platform: %w", err)
	}
	return s, nil
}

// platformOptions are the platform's options for a test: local runtime with the double (or the
// engines of o), files and snapshots on local disk under stateDir, no metrics or probe endpoints.
func platformOptions(ctx context.Context, o options, stateDir string) (platform.Options, error) {
	po := platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0",
		ProvisionTimeout: o.provisionTimeout, ClawHubURL: o.clawHubURL, Log: ctrl.Log.WithName("agentplane"),
		ModelProxy: platform.ModelProxyOptions{Upstreams: o.modelUpstreams, PricesFile: o.modelPrices},
		// Several platforms (one per API server) may run in one process.
		SkipNameValidation: true,
	}
	if o.log != nil {
		po.Log = *o.log
	}
	engines := map[string]string{}
	if len(o.engineDirs) > 0 {
		var err error
		if engines, err = platform.EngineVersions(ctx, o.engineDirs); err != nil {
			return po, err
		}
	} else {
		dir, err := fakeclaw.EngineDir()
		if err != nil {
			return po, err
		}
		engines[FakeEngineVersion] = dir
	}
	files, err := local.New(filepath.Join(stateDir, "files"))
	if err != nil {
		return po, err
	}
	po.Files = files
	po.Runtime = platform.RuntimeOptions{Name: platform.RuntimeLocal, StateDir: filepath.Join(stateDir, "runtime"), EngineDirs: engines}
	return po, nil
}

// Client is a client of the API server with agentplane's scheme (its kinds and the core ones).
// It reads from the API server, not from a cache.
func (p *Platform) Client() client.Client { return p.s.client }

// URL is the REST facade's base URL, such as http://127.0.0.1:41234 (routes under /v0 and /v3).
func (p *Platform) URL() string { return p.s.emb.URL }

// Token creates the workspace when missing (an internal workspace on the pro plan, owned by
// TokenUser, with its namespace of the same name) and returns a new bearer token of that
// workspace with every scope and the owner's role. A Workspace that exists already is left as
// it is (create one first to test a plan, a limit or members of your own).
func (p *Platform) Token(workspace string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return platform.OwnerToken(ctx, p.s.client, p.s.emb.Signer, workspace, TokenUser, "agentplanetest token")
}

// Stop releases this handle. The last handle of a platform stops it: the controllers, the
// facade and every agent's engine process; its files are removed and its connections closed.
// Objects stay on the API server. A second Stop of one handle does nothing.
func (p *Platform) Stop() error {
	p.stopOnce.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		s := p.s
		if s.refs--; s.refs > 0 {
			return
		}
		delete(running, s.key)
		p.stopErr = s.emb.Stop()
		s.conns.CloseAll()
		if err := os.RemoveAll(s.stateDir); err != nil && p.stopErr == nil {
			p.stopErr = err
		}
	})
	return p.stopErr
}
