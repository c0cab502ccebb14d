// Package platform assembles agentplane: the controller-runtime manager with every controller,
// the REST facade, and their shared dependencies. `agentplane manager` (in a cluster) and
// `agentplane dev` (embedded local mode) both start it.
package platform

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentplane/agentplane/apiserver"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/quota"
	agentscheme "github.com/agentplane/agentplane/internal/scheme"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/storage"
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
	// LeaderElection makes controllers run on one replica at a time.
	LeaderElection bool
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
}

// Platform is an assembled, not yet started agentplane.
type Platform struct {
	Manager ctrl.Manager
	API     *apiserver.Server
	Signer  *auth.Signer
	opts    Options
	limiter *quota.Limiter
	sealer  *secrets.Sealer
}

// New builds the manager, registers every controller and the REST facade.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Platform, error) {
	if o.SystemNamespace == "" {
		o.SystemNamespace = DefaultSystemNamespace
	}
	scheme := agentscheme.New()
	gatewaySecrets, err := labels.NewRequirement(apiserver.LabelGatewayAgent, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Logger:                  o.Log,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "agentplane.io",
		LeaderElectionNamespace: o.SystemNamespace,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Only gateway-token Secrets are cached (and indexed); other Secrets are read live.
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*gatewaySecrets)},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, apiserver.IndexGatewayAgent, func(o client.Object) []string {
		if a := o.GetLabels()[apiserver.LabelGatewayAgent]; a != "" {
			return []string{a}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
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
		limiter: &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
		sealer:  &secrets.Sealer{Keys: keys},
	}
	if !o.APIOnly {
		if err := p.setupControllers(); err != nil {
			return nil, err
		}
	}
	if o.APIAddr != "" {
		p.API = apiserver.New(apiserver.Options{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Signer: signer,
			Log: o.Log, Registry: metrics.Registry, Now: time.Now,
			Limiter: p.limiter, Files: o.Files, Sealer: p.sealer,
		})
		if err := mgr.Add(&apiserver.Runnable{Server: p.API, Addr: o.APIAddr, Ready: o.APIReady}); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Start runs everything until ctx ends.
func (p *Platform) Start(ctx context.Context) error { return p.Manager.Start(ctx) }
