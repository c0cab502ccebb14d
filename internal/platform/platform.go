// Package platform assembles agentplane: the controller-runtime manager with every controller,
// the REST facade, and their shared dependencies. `agentplane manager` (in a cluster) and
// `agentplane dev` (embedded local mode) both start it.
package platform

import (
	"context"
	"fmt"
	"net"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentplane/agentplane/controllers"
	domainctrl "github.com/agentplane/agentplane/controllers/domain"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/adapters/channelrelay"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/quota"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	agentscheme "github.com/agentplane/agentplane/internal/scheme"
)

// DefaultSystemNamespace holds the platform's own Secrets (JWT signing key, secrets key).
const DefaultSystemNamespace = "agentplane-system"

// Options configure the platform.
type Options struct {
	// SystemNamespace holds the platform's keys.
	SystemNamespace string
	// APIAddr is where the REST facade listens ("" disables it).
	APIAddr string
	// MetricsAddr and ProbeAddr are the manager's endpoints ("0" disables).
	MetricsAddr, ProbeAddr string
	// LeaderElection makes controllers run on one replica at a time, and tunes the lease.
	LeaderElection LeaderElectionOptions
	// APIReady receives the facade's bound address once it listens.
	APIReady func(addr string)
	// Log is the root logger.
	Log logr.Logger
	// Files stores /v3 files and snapshots (nil: `Storage not configured`).
	Files storage.Store
	// SecretsKey provides the key that seals workspace secrets (nil: the core Secret
	// agentplane-secrets-key in the system namespace).
	SecretsKey secrets.KeySource
	// APIOnly runs the REST facade without controllers (extra facade replicas, tests).
	APIOnly bool
	// SkipNameValidation lets several platforms run their controllers in one process (tests).
	SkipNameValidation bool
	// Runtime chooses where agents run.
	Runtime RuntimeOptions
	// ProvisionTimeout bounds how long agent create and restart wait for the gateway.
	ProvisionTimeout time.Duration
	// Domains configures subdomains and custom domains.
	Domains DomainOptions
	// ClawHubURL is the skill registry installs download from ("" = https://clawhub.ai).
	ClawHubURL string
	// SnapshotRetention is how many completed snapshots per agent are kept (0: 10, <0: all).
	SnapshotRetention int
	// ReservationStaleAfter is how long an agent slot, a domain slot or a host claim whose
	// object never appeared is kept (0: quota.DefaultStaleAfter); RecountInterval is how often
	// the leader frees such leftovers (0: admission.DefaultRecountInterval).
	ReservationStaleAfter, RecountInterval time.Duration
	// AgentWorkers is how many agents the Agent controller reconciles at once (0: 4).
	AgentWorkers int
	// WakeLead is how long before its next scheduled task a suspended agent is woken;
	// WakeWindow how long a woken agent without an idle policy stays awake after its last
	// request; TaskGrace how long a woken agent stays awake after its task's time (zero
	// values: the controllers' defaults).
	WakeLead, WakeWindow, TaskGrace time.Duration
	// APIQPS and APIBurst limit the manager's requests to the Kubernetes API server on the
	// client's side (see ClientConfig; 0 and 0: the config's own).
	APIQPS   float32
	APIBurst int
	// ModelProxy keeps model-provider keys out of the agents.
	ModelProxy ModelProxyOptions
	// ChannelRelay keeps the channels' tokens out of the agents and wakes them for messages.
	ChannelRelay ChannelRelayOptions
	// RateLimits bound the facade's requests per client address and per credential (zero:
	// the facade's defaults; a negative rate turns a limit off).
	RateLimits facade.RateLimitOptions
}

// Platform is an assembled, not yet started agentplane.
type Platform struct {
	Manager ctrl.Manager
	API     *facade.Server
	Signer  *auth.Signer
	opts    Options
	limiter *quota.Limiter
	sealer  *secrets.Sealer
	// admission is the one set of admission rules both doors apply (facade and controllers).
	admission *admission.Admitter

	versions admission.Versions
	runtime  runtime.Runtime
	// modelBase is where agents reach the model proxy ("" : provider keys go to their env).
	modelBase string
	// channelWatch wakes sleeping agents for their messages (nil: not on this replica).
	channelWatch *channelrelay.Watch
	// slackRouter keeps relayed Slack agents' inboxes (nil: Slack not relayed here).
	slackRouter *channelrelay.SlackRouter
	// discordRouter is the relayed Discord agents' gateway (nil: Discord not relayed here).
	discordRouter *channelrelay.DiscordRouter
	// channelRelay is the relay the facade serves (nil: off).
	channelRelay *channelrelay.Relay
	// relaySends counts the agents' calls in flight through this replica's channel relay
	// that may change something on a chat network (the Agent controller's suspends wait
	// for them).
	relaySends channelrelay.Sends
	// facade is where local agents reach the REST facade on this host's loopback (their
	// platform tokens; "": none), the facade's own listener.
	facade   string
	shutdown func(context.Context) error
}

// New builds the manager, registers every controller and the REST facade.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Platform, error) {
	if o.SystemNamespace == "" {
		o.SystemNamespace = DefaultSystemNamespace
	}
	o.Files = instrumentFiles(o.Files)
	scheme := agentscheme.New()
	cfg = ClientConfig(cfg, o.APIQPS, o.APIBurst)
	mgr, err := newManager(ctx, cfg, scheme, o)
	if err != nil {
		return nil, err
	}

	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	key, err := auth.EnsureSigningKey(ctx, direct, o.SystemNamespace)
	if err != nil {
		return nil, err
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		return nil, err
	}
	keys := o.SecretsKey
	if keys == nil {
		keys = &secrets.SecretKeySource{Reader: mgr.GetAPIReader(), Namespace: o.SystemNamespace}
	}
	p := &Platform{
		Manager: mgr, Signer: signer, opts: o,
		limiter: &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), StaleAfter: o.ReservationStaleAfter, Agents: mgr.GetCache()},
		sealer:  &secrets.Sealer{Keys: keys},
	}
	p.versions = o.Runtime.versions()
	p.admission = &admission.Admitter{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(),
		Limiter: p.limiter, Versions: p.versions, SnapshotExists: p.snapshotExists,
		SystemNamespace: o.SystemNamespace,
	}
	// The facade's listener is bound now, so agents' configs can name the model proxy's
	// address before the manager starts.
	apiListener, proxyListener, err := listen(o)
	if err != nil {
		return nil, err
	}
	p.modelBase = p.modelProxyBase(apiListener, proxyListener)
	if apiListener != nil {
		p.facade = loopbackAddr(apiListener.Addr())
	}
	if !o.APIOnly || o.Runtime.Name == RuntimeKube {
		rt, err := p.buildRuntime()
		if err != nil {
			return nil, err
		}
		p.runtime = rt
	}
	if !o.APIOnly {
		if err := p.setupControllers(); err != nil {
			return nil, err
		}
	}
	domainAPI, err := p.domainOptions(ctx, direct)
	if err != nil {
		return nil, err
	}
	if o.APIAddr != "" {
		if err := p.setupFacade(ctx, apiListener, proxyListener, domainAPI); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// newManager builds the controller manager on cfg: its cache, leader election, the field
// indexes the controllers and the facade share, and its health checks.
func newManager(ctx context.Context, cfg *rest.Config, scheme *k8sruntime.Scheme, o Options) (ctrl.Manager, error) {
	byObject := map[client.Object]cache.ByObject{
		// Only the platform's own Secrets (gateway tokens, derived env, keys) are cached;
		// Secrets of users (secretRef targets) are read live.
		&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{agentsv1.LabelAppPartOf: "agentplane"})},
	}
	if o.Runtime.Name == RuntimeKube {
		kube.CacheByObject(byObject)
	}
	mopts := ctrl.Options{
		Scheme:                 scheme,
		Logger:                 o.Log,
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: o.ProbeAddr,
		// No object's managedFields are read: the cache does not keep them (a third of a
		// typical object's size).
		Cache:      cache.Options{ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields()},
		Controller: config.Controller{SkipNameValidation: &o.SkipNameValidation},
	}
	if err := o.LeaderElection.Apply(&mopts, o.SystemNamespace); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	// The controllers and the facade share the manager's cache and its field indexes.
	if err := controllers.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// listen binds the facade's listener (when o.APIAddr is set) and the model proxy's (when it
// has an address of its own and is not disabled).
func listen(o Options) (api, proxy net.Listener, err error) {
	if o.APIAddr == "" {
		return nil, nil, nil
	}
	if api, err = net.Listen("tcp", o.APIAddr); err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", o.APIAddr, err)
	}
	if a := o.ModelProxy.Addr; a != "" && !o.ModelProxy.Disabled {
		if proxy, err = net.Listen("tcp", a); err != nil {
			return nil, nil, fmt.Errorf("listen on %s: %w", a, err)
		}
	}
	return api, proxy, nil
}

// domainOptions: the domains' verification key, their controller (not on API-only
// replicas) and the facade's domain options.
func (p *Platform) domainOptions(ctx context.Context, direct client.Client) (ops.DomainOptions, error) {
	o := p.opts
	domainKey, err := dnsverify.EnsureKey(ctx, direct, o.SystemNamespace)
	if err != nil {
		return ops.DomainOptions{}, err
	}
	if !o.APIOnly {
		if err := p.setupDomains(domainKey); err != nil {
			return ops.DomainOptions{}, err
		}
	}
	return ops.DomainOptions{
		Brand: o.Domains.Brand, AppsDomain: o.Domains.AppsDomain, TokenKey: domainKey,
	}, nil
}

// setupFacade builds the REST facade (and the model proxy, when on) and adds it to the
// manager, serving on apiListener.
func (p *Platform) setupFacade(ctx context.Context, apiListener, proxyListener net.Listener, domainAPI ops.DomainOptions) error {
	o, mgr := p.opts, p.Manager
	if err := p.warmFacadeCache(ctx); err != nil {
		return err
	}
	relay, err := p.setupChannelRelay()
	if err != nil {
		return err
	}
	proxy, err := p.setupModelProxy(proxyListener, relay)
	if err != nil {
		return err
	}
	opts := facade.Options{
		Deps: ops.Deps{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Informers: mgr.GetCache(), Now: time.Now,
			Admission: p.admission, Files: o.Files, Sealer: p.sealer,
			Runtime: p.runtime, Engine: openclaw.New(), ProvisionTimeout: o.ProvisionTimeout, ClawHubURL: o.ClawHubURL,
			Domains: domainAPI,
		},
		Signer: p.Signer, Log: o.Log, Registry: metrics.Registry,
		RateLimits: o.RateLimits,
	}
	if proxy != nil {
		opts.ModelProxy = proxy
		opts.Deps.ModelMeter = proxy
	}
	if relay != nil {
		opts.ChannelRelay = relay
	}
	p.API = facade.New(opts)
	return mgr.Add(&facade.Runnable{Server: p.API, Listener: apiListener, Ready: o.APIReady})
}

// Start runs everything until ctx ends, then stops the runtime's local gateways (if any).
func (p *Platform) Start(ctx context.Context) error {
	err := p.Manager.Start(ctx)
	if p.shutdown != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if serr := p.shutdown(stopCtx); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}

// Versions are the engine versions agents may run.
func (p *Platform) Versions() admission.Versions { return p.versions }

// --- Domains ---

// DomainOptions configure domains: the domain controller and the facade's domain routes.
type DomainOptions struct {
	// Brand is refused in names and names the TXT record `_<brand>-verify.<domain>`
	// (default "agentplane").
	Brand string
	// AppsDomain is the parent of subdomains (default "agents.localhost").
	AppsDomain string
	// Nameservers (`host:port`) answer TXT look-ups (default $AGENTPLANE_DNS_NAMESERVERS,
	// else /etc/resolv.conf).
	Nameservers []string
	// Resolver replaces the DNS client built from Nameservers.
	Resolver dnsverify.Resolver
	// IngressClass and ClusterIssuer (cert-manager) shape the Ingresses of runtime kube.
	IngressClass, ClusterIssuer string
	// Gateway, NAMESPACE/NAME[/SECTION], routes Domains with Gateway API HTTPRoutes attached
	// to that Gateway instead of Ingresses (runtime kube).
	Gateway string
	// CheckInterval and MaxCheckInterval shape the delay between look-ups (10s doubling to 10m).
	CheckInterval, MaxCheckInterval time.Duration
}

// setupDomains registers the domain controller: Ingresses or HTTPRoutes route hosts on runtime kube, other
// runtimes only record routes (local mode).
func (p *Platform) setupDomains(key []byte) error {
	mgr, o := p.Manager, p.opts.Domains
	resolver := o.Resolver
	if resolver == nil {
		resolver = dnsverify.New(o.Nameservers, 0)
	}
	resolver = instrumentResolver(resolver)
	var router domainctrl.Router = &domainctrl.RecordRouter{}
	if p.opts.Runtime.Name == RuntimeKube {
		var err error
		if router, err = p.domainRouter(); err != nil {
			return err
		}
	}
	return (&domainctrl.Reconciler{
		Client: mgr.GetClient(), Resolver: resolver, TokenKey: key,
		Brand: o.Brand, AppsDomain: o.AppsDomain, Router: router, Admission: p.admission,
		CheckInterval: o.CheckInterval, MaxCheckInterval: o.MaxCheckInterval,
		Recorder: eventRecorder(mgr, "agentplane-domain"),
	}).SetupWithManager(mgr)
}
