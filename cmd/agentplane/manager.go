package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	memlimit "github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/channelrelay"
	"github.com/agentplane/agentplane/internal/adapters/clawhub"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/s3"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/quota"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	"github.com/agentplane/agentplane/internal/scheme"
)

// compileCacheDirUsage is the --compile-cache-dir flag's help (dev and manager, local runtime).
const compileCacheDirUsage = "with the local runtime: where each engine's compile cache is warmed once and sealed, shown read-only to every sandbox; platforms on one host may share one"

// templateDirUsage is the --template-dir flag's help (dev and manager, local runtime).
const templateDirUsage = "with the local runtime and --gateway-templates: where the engines' template gateways are kept (about 700 MB each); platforms on one host may share one"

// gatewayTemplatesUsage is the --gateway-templates flag's help.
const gatewayTemplatesUsage = "with the local runtime (root, CRIU and the reseed addon; false to boot every gateway): give each new agent without secrets of its own a copy of its engine's template gateway (booted once, checkpointed, restored into the agent's sandbox with its own uid, cgroup, network and randomness) instead of booting one"

// memoryMergeUsage is the --memory-merge flag's help (dev and manager, local runtime).
const memoryMergeUsage = "with the local runtime: mark every gateway's memory mergeable by the kernel's same-page merging (KSM; pages merge while /sys/kernel/mm/ksm/run is 1), so that pages agents hold alike are kept once; off by default: a merged page is shared between tenants, and how long a write to it takes tells an agent that another holds the same bytes"

// checkpointPackAfterUsage is the --checkpoint-pack-after flag's help.
var checkpointPackAfterUsage = fmt.Sprintf("with the local runtime and checkpoints: how long a suspended agent sleeps before its checkpoint's pages are compressed (about a fifth of the disk; its wake takes about a second more); 0 = %s, negative = never", local.DefaultCheckpointPackAfter)

// agentCAFileUsage is the --agent-ca-file flag's help (dev and manager, local runtime).
const agentCAFileUsage = "with the local runtime: a PEM file of certificate authorities the agents' Node trusts besides its own (NODE_EXTRA_CA_CERTS in each gateway's and command's environment, the file shown read-only in every sandbox): the CA of an egress that intercepts TLS, without which plugin and skill installs from the registry fail (\"self-signed certificate in certificate chain\"); default: this process's own $NODE_EXTRA_CA_CERTS"

func newManagerCommand() *cobra.Command {
	m := &managerFlags{o: platform.Options{Runtime: platform.RuntimeOptions{Name: platform.RuntimeKube}}}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers and the REST facade (in a cluster)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := ctrl.SetupSignalHandler()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			if err := m.complete(ctx, cfg); err != nil {
				return err
			}
			p, err := platform.New(ctx, cfg, m.o)
			if err != nil {
				return err
			}
			return p.Start(ctx)
		},
	}
	m.add(cmd)
	return cmd
}

// managerFlags are the manager's flags: the platform's options and what they are made from.
type managerFlags struct {
	o                          platform.Options
	storageDir, secretsKeyFile string
	engineDirs, tolerations    []string
	s3f                        s3Flags
}

// complete makes the options from the flags: the Go memory limit, the storage backend, the
// agents' tolerations, the secrets key and the local runtime's engines and state dir.
func (m *managerFlags) complete(ctx context.Context, cfg *rest.Config) error {
	o := &m.o
	var err error
	o.Log = ctrl.Log
	// The Go heap's soft limit at 90% of the container's memory limit (unless GOMEMLIMIT
	// says otherwise): the collector works harder near the limit instead of the
	// container being OOM-killed, and RSS stays close to the live heap.
	if limit, err := memlimit.Set(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup)); err == nil && limit > 0 {
		o.Log.Info("Go memory limit from the cgroup", "bytes", limit)
	}
	if o.Files, err = openStorage(ctx, cfg, m.storageDir, &m.s3f, o.SystemNamespace); err != nil {
		return err
	}
	if err := checkRenderingRollout(o.Runtime.RenderingRollout); err != nil {
		return err
	}
	for _, t := range m.tolerations {
		tol, err := kube.ParseToleration(t)
		if err != nil {
			return fmt.Errorf("--agent-toleration: %w", err)
		}
		o.Runtime.Tolerations = append(o.Runtime.Tolerations, tol)
	}
	if m.secretsKeyFile != "" {
		o.SecretsKey = secrets.FileKeySource{Path: m.secretsKeyFile}
	}
	if o.Runtime.Name == platform.RuntimeLocal {
		if len(m.engineDirs) == 0 {
			return errors.New("--runtime local needs --engine-dir")
		}
		if o.Runtime.EngineDirs, err = engineVersions(ctx, m.engineDirs); err != nil {
			return err
		}
		if o.Runtime.StateDir == "" {
			o.Runtime.StateDir = "agentplane-runtime"
		}
	}
	return nil
}

// checkRenderingRollout accepts the values of --rendering-rollout.
func checkRenderingRollout(v string) error {
	if v != platform.RenderingWaves && v != platform.RenderingNextRestart {
		return fmt.Errorf("--rendering-rollout %q: waves or next-restart", v)
	}
	return nil
}

// add declares the manager's flags on cmd (a declarative list: one flag a line).
func (m *managerFlags) add(cmd *cobra.Command) {
	o := &m.o
	addPlatformFlags(cmd, o, ":8080")
	cmd.Flags().StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "metrics endpoint address (0 disables)")
	cmd.Flags().StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "health and readiness probe address")
	cmd.Flags().BoolVar(&o.LeaderElection.Enabled, "leader-elect", false, "run controllers on one replica at a time (the REST facade runs on all)")
	cmd.Flags().DurationVar(&o.LeaderElection.LeaseDuration, "leader-elect-lease-duration", platform.DefaultLeaseDuration, "how long a crashed leader's lease holds before a standby takes over")
	cmd.Flags().DurationVar(&o.LeaderElection.RenewDeadline, "leader-elect-renew-deadline", platform.DefaultRenewDeadline, "how long a leader that cannot renew its lease keeps acting before it steps down (less than the lease duration)")
	cmd.Flags().DurationVar(&o.LeaderElection.RetryPeriod, "leader-elect-retry-period", platform.DefaultRetryPeriod, "how often the leader renews and a standby tries to lead (a clean stop hands over within one)")
	cmd.Flags().StringSliceVar(&m.engineDirs, "engine-dir", nil, "OpenClaw install dir with bin/openclaw, for --runtime local; repeat for several versions")
	cmd.Flags().StringVar(&o.Runtime.StateDir, "runtime-dir", "", "where --runtime local keeps the agents' homes (default ./agentplane-runtime)")
	cmd.Flags().StringVar(&o.Runtime.Sandbox, "sandbox", local.SandboxAuto, "with --runtime local: contain each agent in a bubblewrap sandbox: auto, required or off (without one, one workspace only)")
	cmd.Flags().StringVar(&o.Runtime.CompileCacheDir, "compile-cache-dir", "", compileCacheDirUsage+" (default <runtime-dir>/compile-cache)")
	cmd.Flags().BoolVar(&o.Runtime.GatewayTemplates, "gateway-templates", true, gatewayTemplatesUsage)
	cmd.Flags().StringVar(&o.Runtime.TemplateDir, "template-dir", "", templateDirUsage+" (default <runtime-dir>/templates)")
	cmd.Flags().BoolVar(&o.Runtime.MemoryMerge, "memory-merge", false, memoryMergeUsage)
	cmd.Flags().DurationVar(&o.Runtime.CheckpointPackAfter, "checkpoint-pack-after", 0, checkpointPackAfterUsage)
	cmd.Flags().StringVar(&o.Runtime.CAFile, "agent-ca-file", os.Getenv("NODE_EXTRA_CA_CERTS"), agentCAFileUsage)
	cmd.Flags().StringVar(&o.Runtime.Name, "runtime", platform.RuntimeKube, "where agents run: kube (StatefulSets) or local (processes on this host)")
	cmd.Flags().StringSliceVar(&o.Runtime.Versions, "engine-versions", []string{engine.PinnedVersion}, "engine versions agents may run (kube runtime; their images must exist)")
	cmd.Flags().StringVar(&o.Runtime.DefaultVersion, "default-engine-version", "", "engine version of agents that name none (default: the newest offered)")
	cmd.Flags().StringVar(&o.Runtime.Image, "engine-image", "", "gateway image template, %s is the version (default ghcr.io/openclaw/openclaw:%s)")
	cmd.Flags().StringSliceVar(&o.Runtime.Init, "engine-init", nil, "command run as PID 1 of the gateway container before the engine, to reap its child processes (agentplane's own image: /sbin/tini,--; empty runs the engine as PID 1)")
	cmd.Flags().StringSliceVar(&o.Runtime.Probe, "engine-probe", nil, "exec probe command in the gateway image, given the URL of the engine's probe route (agentplane's own image: "+kube.ImageProbe+"; empty probes with HTTP GETs)")
	cmd.Flags().StringToStringVar(&o.Runtime.NodeSelector, "agent-node-selector", nil, "node labels every gateway pod selects, key=value,... (kube runtime: place the agents on a node pool)")
	cmd.Flags().StringVar(&o.Runtime.RenderingRollout, "rendering-rollout", platform.RenderingWaves, "how gateways running an earlier manager's rendering of their pod get this one's (kube runtime): waves (a RenderingRollout restarts them in waves, snapshot first, halting on an unhealthy agent) or next-restart (never a restart for that alone)")
	cmd.Flags().StringArrayVar(&m.tolerations, "agent-toleration", nil, "taint every gateway pod tolerates, key=value:Effect, key:Effect (any value) or key=value (any effect); repeat for several (kube runtime)")
	cmd.Flags().StringVar(&m.storageDir, "storage-dir", "", "directory for files and snapshots (local disk backend)")
	m.s3f.add(cmd)
	cmd.Flags().IntVar(&o.SnapshotRetention, "snapshot-retention", 10, "completed snapshots kept per agent (older ones and their unreferenced archives are deleted; negative keeps all)")
	cmd.Flags().StringVar(&m.secretsKeyFile, "secrets-key-file", "", "file with the 32-byte secrets key (default: Secret agentplane-secrets-key in the system namespace)")
	cmd.Flags().DurationVar(&o.ReservationStaleAfter, "reservation-stale-after", quota.DefaultStaleAfter, "age at which an agent slot, domain slot or host claim whose object never appeared is freed (longer than any request)")
	cmd.Flags().DurationVar(&o.RecountInterval, "recount-interval", admission.DefaultRecountInterval, "how often the leader frees stale slots and host claims")
}

// addPlatformFlags declares the flags `manager` and `dev` share.
func addPlatformFlags(cmd *cobra.Command, o *platform.Options, apiAddr string) {
	f := cmd.Flags()
	f.StringVar(&o.APIAddr, "api-addr", apiAddr, "address of the REST facade")
	f.StringVar(&o.SystemNamespace, "system-namespace", platform.DefaultSystemNamespace, "namespace of the platform's own keys")
	f.StringVar(&o.ClawHubURL, "clawhub-url", clawhub.DefaultURL, "ClawHub registry skills are installed from")
	f.StringVar(&o.Domains.AppsDomain, "apps-domain", "agents.localhost", "parent domain of agent subdomains (<subdomain>.<apps-domain>)")
	f.StringVar(&o.Domains.Brand, "brand", "agentplane", "brand refused in domain names; custom domains prove ownership with _<brand>-verify.<domain>")
	f.StringSliceVar(&o.Domains.Nameservers, "dns-nameservers", nil, "host:port of DNS servers for ownership checks (default $AGENTPLANE_DNS_NAMESERVERS, else /etc/resolv.conf)")
	f.StringVar(&o.Domains.IngressClass, "ingress-class", "", "IngressClass of agent domains (kube runtime)")
	f.StringVar(&o.Domains.ClusterIssuer, "cluster-issuer", "", "cert-manager ClusterIssuer for TLS of agent domains (kube runtime; empty: no TLS)")
	f.DurationVar(&o.ProvisionTimeout, "provision-timeout", 3*time.Minute, "how long agent create and restart wait for the gateway before answering 202")
	f.IntVar(&o.AgentWorkers, "agent-workers", platform.DefaultAgentWorkers, "agents the Agent controller reconciles at once")
	f.DurationVar(&o.WakeLead, "wake-lead", agentctrl.DefaultWakeLead, "how long before its next scheduled task a suspended agent is woken")
	f.DurationVar(&o.WakeWindow, "wake-window", agentctrl.DefaultWakeWindow, "how long a woken agent without an idle policy stays awake after its last request")
	// No client-side limit by default: the API server's priority and fairness paces the
	// manager (platform.DefaultAPIQPS says why that is safe).
	f.Float32Var(&o.APIQPS, "kube-api-qps", platform.DefaultAPIQPS, "requests per second to the Kubernetes API server, sustained (negative: no client-side limit, the API server's priority and fairness paces the manager; 0: the kubeconfig's own)")
	f.IntVar(&o.APIBurst, "kube-api-burst", platform.DefaultAPIBurst, "requests to the Kubernetes API server in a burst, with a positive --kube-api-qps (0: twice --kube-api-qps)")
	f.BoolVar(&o.ModelProxy.Disabled, "no-model-proxy", false, "hand model-provider keys to the agents' environment instead of keeping them in the model proxy")
	f.StringVar(&o.ModelProxy.URL, "model-proxy-url", "", "the REST facade's base URL as agents reach it for the model proxy (default: the facade on loopback for --runtime local, http://agentplane-api.<system-namespace>.svc for kube)")
	f.StringToStringVar(&o.ModelProxy.Upstreams, "model-proxy-upstream", nil, "provider=URL origins the model proxy forwards to instead of the providers' own (mirrors, egress proxies, tests)")
	f.StringVar(&o.ModelProxy.PricesFile, "model-prices", "", "a model price table (YAML or JSON: currency, and per model its input and output price per million tokens; see config/model-prices/example.yaml) the model proxy prices each request by, for the console's and the API's spend; unset counts tokens only")
	f.DurationVar(&o.ModelProxy.FlushInterval, "usage-flush-interval", 30*time.Second, "how often each replica writes the model usage it counted to Agent and Workspace status")
	f.BoolVar(&o.ChannelRelay.Disabled, "no-channel-relay", false, "hand Telegram, Slack and Discord tokens to the agents' environment instead of relaying their bots through the platform (which also wakes a sleeping agent for its messages); the relay is off with --no-model-proxy too")
	f.StringVar(&o.ChannelRelay.TelegramAPI, "telegram-api-url", channelrelay.DefaultTelegramAPI, "the Telegram Bot API origin the channel relay calls (a self-hosted Bot API server, tests)")
	f.BoolVar(&o.ChannelRelay.Slack, "slack-relay", true, "relay Slack channels too (local runtime; the kube runtime never does): the platform holds each Slack app's socket, keeps both tokens out of the agent (which runs the engine's Slack relay mode) and wakes a sleeping agent for its messages; false hands the tokens to the agent, which then never sleeps while it has a Slack channel")
	f.StringVar(&o.ChannelRelay.SlackAPI, "slack-api-url", channelrelay.DefaultSlackAPI, "the Slack Web API origin the channel relay calls (tests)")
	f.BoolVar(&o.ChannelRelay.Discord, "discord-relay", true, "relay Discord channels too (local runtime; the kube runtime never does): the platform holds each Discord bot's gateway connection and token, the agent gets a relay token; a sleeping agent's messages wait in the platform and wake it")
	f.StringVar(&o.ChannelRelay.DiscordAPI, "discord-api-url", channelrelay.DefaultDiscordAPI, "the Discord REST base (versioned) the channel relay calls (tests)")
	f.StringVar(&o.ChannelRelay.DiscordCDN, "discord-cdn-url", "", "where the channel relay fetches the attachments it serves to agents, in place of Discord's CDN hosts (tests)")
	addIsolationFlags(f, o)
	addRateLimitFlags(f, o)
}

// s3Flags select the S3-compatible storage backend of `agentplane manager` for /v3 files and
// agent snapshots (instead of --storage-dir):
//
//	--s3-endpoint            host[:port] of the S3 API, without scheme (enables the backend)
//	--s3-bucket              the bucket; it must exist
//	--s3-region              the bucket's region (default us-east-1)
//	--s3-prefix              optional key prefix under which every space lives ("a/b")
//	--s3-insecure            plain http instead of https (in-cluster MinIO, versitygw)
//	--s3-credentials-secret  core Secret in the system namespace with the keys accessKey and
//	                         secretKey, read once at start (rotate by restarting the manager)
//
// Objects are keyed [<prefix>/]<workspace>/<network or "snapshots">/<cid>. An unreachable
// endpoint does not stop the manager: storage routes answer 503 until it answers again.
type s3Flags struct {
	endpoint, bucket, region, prefix, credentialsSecret string
	insecure                                            bool
}

func (f *s3Flags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.endpoint, "s3-endpoint", "", "S3-compatible storage endpoint host[:port] for files and snapshots (instead of --storage-dir)")
	fl.StringVar(&f.bucket, "s3-bucket", "", "S3 bucket (must exist)")
	fl.StringVar(&f.region, "s3-region", "us-east-1", "S3 region of the bucket")
	fl.StringVar(&f.prefix, "s3-prefix", "", "key prefix for every object in the bucket")
	fl.BoolVar(&f.insecure, "s3-insecure", false, "talk plain http to the S3 endpoint")
	fl.StringVar(&f.credentialsSecret, "s3-credentials-secret", "", "Secret in the system namespace with accessKey and secretKey for S3")
}

// open reads the credentials Secret (if named) and builds the S3 store.
// openStorage opens the storage backend of --storage-dir or the --s3-* flags (nil: neither).
func openStorage(ctx context.Context, cfg *rest.Config, storageDir string, s3f *s3Flags, systemNamespace string) (storage.Store, error) {
	switch {
	case storageDir != "" && s3f.endpoint != "":
		return nil, errors.New("--storage-dir and --s3-endpoint exclude each other: choose one storage backend")
	case s3f.endpoint != "":
		return s3f.open(ctx, cfg, systemNamespace)
	case storageDir != "":
		return localStorage(storageDir)
	}
	return nil, nil
}

func (f *s3Flags) open(ctx context.Context, cfg *rest.Config, systemNamespace string) (*s3.Store, error) {
	if f.bucket == "" {
		return nil, errors.New("--s3-bucket is required with --s3-endpoint")
	}
	c := s3.Config{Endpoint: f.endpoint, Bucket: f.bucket, Region: f.region, Prefix: f.prefix, UseSSL: !f.insecure}
	if f.credentialsSecret != "" {
		cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			return nil, err
		}
		sec := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: f.credentialsSecret}, sec); err != nil {
			return nil, fmt.Errorf("read S3 credentials Secret %s/%s: %w", systemNamespace, f.credentialsSecret, err)
		}
		c.AccessKey, c.SecretKey = string(sec.Data["accessKey"]), string(sec.Data["secretKey"])
		if c.AccessKey == "" || c.SecretKey == "" {
			return nil, fmt.Errorf("S3 credentials Secret %s/%s needs the keys accessKey and secretKey", systemNamespace, f.credentialsSecret)
		}
	}
	return s3.New(c)
}
