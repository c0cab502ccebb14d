package platform

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// Runtime names.
const (
	RuntimeLocal = "local"
	RuntimeKube  = "kube"
)

// RuntimeOptions choose where agents run.
type RuntimeOptions struct {
	// Name is "local" (agents are processes on this host) or "kube" (StatefulSets); "" runs
	// no agents (facade-only replicas and tests that need none).
	Name string
	// DefaultVersion is the engine version of agents that name none.
	DefaultVersion string
	// Local: StateDir holds the agents' homes; EngineDirs maps a version to its install dir;
	// Ports is where gateway ports are allocated (zero: local.DefaultFirstPort-DefaultLastPort;
	// two platforms in one process need ranges of their own).
	StateDir   string
	EngineDirs map[string]string
	Ports      local.PortRange
	// Local: Sandbox is local.SandboxAuto (""), SandboxRequired or SandboxOff; ReadOnlyPaths
	// are further host paths every agent's sandbox shows read-only (local.Options).
	Sandbox       string
	ReadOnlyPaths []string
	// Local: CompileCacheDir is where the engines' compile caches are sealed
	// (local.Options.CompileCacheDir; "": under StateDir).
	CompileCacheDir string
	// Local: GatewayTemplates gives new agents copies of their engine's template gateway
	// (local.Options.Templates); TemplateDir keeps the templates ("": under StateDir).
	GatewayTemplates bool
	TemplateDir      string
	// Local: MemoryMerge marks the gateways' memory mergeable by the kernel's same-page
	// merging (local.Options.MemoryMerge; off: a side channel between agents).
	MemoryMerge bool
	// Local: CheckpointPackAfter is how long a suspended agent sleeps before its checkpoint's
	// pages are compressed (local.Options.CheckpointPackAfter; 0: the default, negative: never).
	CheckpointPackAfter time.Duration
	// Local: CAFile is a PEM file of further certificate authorities the agents trust
	// (local.Options.CAFile).
	CAFile string
	// Kube: Versions the cluster may run (images must exist); Image is the image template;
	// Init runs as PID 1 before the engine (kube.Options.Init); Probe is the exec probe
	// command in the image (kube.Options.Probe).
	Versions []string
	Image    string
	Init     []string
	Probe    []string
	// Kube: NodeSelector and Tolerations of every gateway pod (kube.Options), to place the
	// agents on a node pool.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Kube: isolation of every gateway pod. RuntimeClassName is the default RuntimeClass
	// (an Agent's or its Workspace's spec.runtimeClassName wins); SeccompProfile the pods'
	// Localhost seccomp profile (kube.Options.SeccompProfile); NetworkPolicy gives each
	// agent a default-deny NetworkPolicy that lets in the manager's pods and IngressNamespaces
	// and lets out the cluster DNS, the model proxy and the Egress rules the agent needs.
	RuntimeClassName  string
	SeccompProfile    string
	NetworkPolicy     bool
	IngressNamespaces []string
	Egress            []kube.EgressRule
	// DNS are the cluster DNS's addresses outside the pod network (CIDRs) that agents may
	// query; empty: the kube-dns pods, or the endpoints of a kube-dns Service without a
	// selector (kube.DiscoverDNS).
	DNS []string
	// Kube: RenderingRollout is how gateways running an earlier manager's rendering of their
	// pod move to this manager's: RenderingWaves ("" too) or RenderingNextRestart.
	RenderingRollout string
}

// How outdated renderings of the gateways are applied (RuntimeOptions.RenderingRollout).
const (
	// RenderingWaves: in waves, by the RenderingRollout the manager makes when it leads
	// (snapshot first, health after, halt on an unhealthy agent).
	RenderingWaves = "waves"
	// RenderingNextRestart: never a restart for a rendering alone; a gateway gets the new
	// rendering whenever it restarts for another reason.
	RenderingNextRestart = "next-restart"
)

// versions are the engine versions the configured runtime offers.
func (o RuntimeOptions) versions() admission.Versions {
	v := admission.Versions{Default: o.DefaultVersion}
	if o.Name == RuntimeLocal {
		for ver := range o.EngineDirs {
			v.Available = append(v.Available, ver)
		}
	} else {
		v.Available = append(v.Available, o.Versions...)
	}
	sort.Strings(v.Available)
	if v.Default == "" && len(v.Available) > 0 {
		v.Default = v.Available[len(v.Available)-1]
	}
	return v
}

// buildRuntime makes the configured runtime (nil for none). The Agent controller takes its
// watches from the runtime itself (runtime.Watcher).
func (p *Platform) buildRuntime() (runtime.Runtime, error) {
	o := p.opts.Runtime
	eng := openclaw.New()
	mgr := p.Manager
	switch o.Name {
	case "":
		return nil, nil
	case RuntimeLocal:
		rt, err := local.New(local.Options{
			StateDir: o.StateDir, Engine: eng, EngineDirs: o.EngineDirs, PortRange: o.Ports, Log: p.opts.Log.WithName("runtime"),
			Sandbox: o.Sandbox, ReadOnlyPaths: o.ReadOnlyPaths, CompileCacheDir: o.CompileCacheDir, Templates: o.GatewayTemplates, TemplateDir: o.TemplateDir,
			MemoryMerge:         o.MemoryMerge,
			CheckpointPackAfter: o.CheckpointPackAfter,
			CAFile:              o.CAFile, HostServices: hostServices(p.modelBase, p.facade), Egress: localEgress(o.Egress),
			PlatformService: loopbackService(p.modelBase), GatewayEnv: p.relayEnv(eng), Busy: p.relayBusy(), Quiesce: p.relayQuiesce(),
		})
		if err != nil {
			return nil, err
		}
		p.shutdown = rt.Shutdown
		return rt, nil
	case RuntimeKube:
		return kube.New(kube.Options{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RESTConfig: mgr.GetConfig(),
			Scheme: mgr.GetScheme(), Engine: eng, Image: o.Image, Init: o.Init, Probe: o.Probe,
			NodeSelector: o.NodeSelector, Tolerations: o.Tolerations,
			RuntimeClassName: o.RuntimeClassName, SeccompProfile: o.SeccompProfile, Network: p.networkOptions(),
		}), nil
	}
	return nil, fmt.Errorf("unknown runtime %q (local or kube)", o.Name)
}

// Checkpoints reports whether the local runtime checkpoints suspended gateways (their memory
// kept on disk, restored on wake) and, when it does not, why (true for the kube runtime and
// for none: there a suspend always ends the gateway).
func (p *Platform) Checkpoints() (bool, string) {
	if rt, ok := p.runtime.(interface{ Checkpoints() (bool, string) }); ok {
		return rt.Checkpoints()
	}
	return true, ""
}

// Templates reports whether the local runtime gives new agents copies of their engine's
// template gateway and, when it does not, why (false for the kube runtime and for none).
func (p *Platform) Templates() (bool, string) {
	if rt, ok := p.runtime.(interface{ Templates() (bool, string) }); ok {
		return rt.Templates()
	}
	return false, "only the local runtime has gateway templates"
}

// TemplateReady reports whether the local runtime's template of the engine version is ready
// to give new agents their gateways and, when it is not, why (a missing or stale one is
// started); false for the kube runtime and for none.
func (p *Platform) TemplateReady(version string) (bool, string) {
	if rt, ok := p.runtime.(interface{ TemplateReady(string) (bool, string) }); ok {
		return rt.TemplateReady(version)
	}
	return false, "only the local runtime has gateway templates"
}

// Sandboxed reports whether the local runtime runs agents in sandboxes and, when it does not,
// why (true for the kube runtime and for none: pods contain their agents).
func (p *Platform) Sandboxed() (bool, string) {
	if rt, ok := p.runtime.(interface{ Sandboxed() (bool, string) }); ok {
		return rt.Sandboxed()
	}
	return true, ""
}

// Networks reports whether each local gateway has a network namespace of its own (where it
// reaches the platform's own service at local.PlatformAddr) and, when not, why; true for a
// runtime without such a notion.
func (p *Platform) Networks() (bool, string) {
	if rt, ok := p.runtime.(interface{ Networks() (bool, string) }); ok {
		return rt.Networks()
	}
	return true, ""
}

// HomeLimit reports whether the runtime bounds each agent's home and, when not, why (the
// local runtime; kube's homes are volume claims of a size).
func (p *Platform) HomeLimit() (bool, string) {
	if rt, ok := p.runtime.(interface{ HomeLimit() (bool, string) }); ok {
		return rt.HomeLimit()
	}
	return true, ""
}

// hostServices are what local agents reach on this host's loopback from their network
// namespaces: the model proxy (base, when it is an http URL on loopback) and the REST facade
// (its loopback address, "" for none), each once.
func hostServices(base, facade string) []string {
	var out []string
	if svc := loopbackService(base); svc != "" {
		out = append(out, svc)
	}
	if facade != "" && !slices.Contains(out, facade) {
		out = append(out, facade)
	}
	return out
}

// loopbackService is the host:port of base when it is plain http on this host's IPv4
// loopback with a port ("": it is not).
func loopbackService(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		return ""
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() || ip.To4() == nil {
		return ""
	}
	return u.Host
}

// loopbackAddr is where a listener at a is reached on this host's IPv4 loopback ("" : it is
// not: bound to another address).
func loopbackAddr(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok || !(t.IP.IsLoopback() || t.IP.IsUnspecified()) {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port))
}

// localEgress turns --agent-egress rules into the local runtime's: each opens its destination
// to every agent (the local egress proxy has no per-agent policy; it lets out the public
// internet anyway, so a rule matters for private ranges and this host's addresses).
func localEgress(rules []kube.EgressRule) []local.EgressRule {
	var out []local.EgressRule
	for _, r := range rules {
		if p, err := netip.ParsePrefix(r.CIDR); err == nil {
			out = append(out, local.EgressRule{Prefix: p, Port: int(r.Port)})
		}
	}
	return out
}
