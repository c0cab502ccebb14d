package kube

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	"github.com/agentplane/agentplane/internal/scheme"
)

const testToken = "gw-token-VERY-SECRET-0123456789"

func testAgent() *agentsv1.Agent {
	return &agentsv1.Agent{
		TypeMeta:   metav1.TypeMeta{APIVersion: "agentplane.io/v1alpha1", Kind: "Agent"},
		ObjectMeta: metav1.ObjectMeta{Name: "a1", Namespace: "ws1", UID: "uid-a1"},
		Spec:       agentsv1.AgentSpec{DisplayName: "Agent One"},
	}
}

func testDesired() runtime.Desired {
	return runtime.Desired{
		EngineVersion:      engine.PinnedVersion,
		GatewayToken:       testToken,
		GatewayTokenSecret: "a1-gateway-token",
		Env:                map[string]string{"OPENAI_API_KEY": "sk-attached-SECRET-value"},
		EnvSecret:          "a1-env",
		Identity:           engine.Identity{Name: "Agent One", AgentProfile: agentsv1.AgentProfile{Emoji: "🦀"}},
	}
}

func testOptions() Options {
	return Options{Scheme: scheme.New(), Engine: stubEngine{}}
}

func mustSTS(t *testing.T, d runtime.Desired, o Options) *appsv1.StatefulSet {
	t.Helper()
	sts, err := BuildStatefulSet(testAgent(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	return sts
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func TestStatefulSetReplicas(t *testing.T) {
	for _, tc := range []struct {
		stopped bool
		want    int32
	}{{false, 1}, {true, 0}} {
		d := testDesired()
		d.Stopped = tc.stopped
		sts := mustSTS(t, d, testOptions())
		if got := *sts.Spec.Replicas; got != tc.want {
			t.Errorf("stopped=%v: replicas %d, want %d", tc.stopped, got, tc.want)
		}
	}
}

func TestConfigHash(t *testing.T) {
	base := ConfigHash(testDesired())
	for _, tc := range []struct {
		name    string
		mutate  func(*runtime.Desired)
		changes bool
	}{
		{"same desired", func(*runtime.Desired) {}, false},
		{"stopped", func(d *runtime.Desired) { d.Stopped = true }, false},
		{"identity (seed only)", func(d *runtime.Desired) { d.Identity.Name = "Other" }, false},
		{"env map copy", func(d *runtime.Desired) { d.Env = map[string]string{"OPENAI_API_KEY": "sk-attached-SECRET-value"} }, false},
		{"token rotated", func(d *runtime.Desired) { d.GatewayToken = "new-token" }, true},
		{"token secret renamed", func(d *runtime.Desired) { d.GatewayTokenSecret = "other" }, true},
		{"restart nonce", func(d *runtime.Desired) { d.RestartNonce = "r1" }, true},
		{"engine version", func(d *runtime.Desired) { d.EngineVersion = "2026.9.7" }, true},
		{"env value", func(d *runtime.Desired) { d.Env["OPENAI_API_KEY"] = "sk-rotated" }, true},
		{"env key added", func(d *runtime.Desired) { d.Env["SLACK_BOT_TOKEN"] = "x" }, true},
		{"env removed", func(d *runtime.Desired) { d.Env = nil }, true},
		{"env secret renamed", func(d *runtime.Desired) { d.EnvSecret = "a1-env-2" }, true},
		// Field boundaries are length-prefixed: moving text between fields changes the hash.
		{"shifted text", func(d *runtime.Desired) { d.GatewayTokenSecret, d.GatewayToken = "a1-gateway-tok", "en"+testToken }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDesired()
			tc.mutate(&d)
			got := ConfigHash(d)
			if (got != base) != tc.changes {
				t.Errorf("hash changed=%v, want %v", got != base, tc.changes)
			}
			sts := mustSTS(t, d, testOptions())
			if ann := sts.Spec.Template.Annotations[agentsv1.AnnotationConfigHash]; ann != got {
				t.Errorf("pod template annotation %q, want %q", ann, got)
			}
		})
	}
}

func TestPodSecurity(t *testing.T) {
	spec := mustSTS(t, testDesired(), testOptions()).Spec.Template.Spec
	ps := spec.SecurityContext
	if !*ps.RunAsNonRoot || *ps.RunAsUser != 1000 || *ps.RunAsGroup != 1000 || *ps.FSGroup != 1000 ||
		ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", ps)
	}
	if *spec.AutomountServiceAccountToken || *spec.EnableServiceLinks {
		t.Error("pods must not get a service account token or service links")
	}
	for _, name := range []string{ContainerSeed, ContainerGateway} {
		sc := container(t, spec, name).SecurityContext
		if !*sc.RunAsNonRoot || *sc.RunAsUser != 1000 || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
			!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
			sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s security context %+v", name, sc)
		}
	}
	// A read-only root needs a writable /tmp.
	gw := container(t, spec, ContainerGateway)
	mounts := map[string]string{}
	for _, m := range gw.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	if mounts["/tmp"] != VolumeTmp || mounts[Home] != VolumeHome {
		t.Errorf("gateway mounts %v", mounts)
	}
	var tmp *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == VolumeTmp {
			tmp = &spec.Volumes[i]
		}
	}
	if tmp == nil || tmp.EmptyDir == nil {
		t.Fatalf("no emptyDir for /tmp: %+v", spec.Volumes)
	}
	// Bounded: a tmpfs of its size, whose writes past it fail (a disk-backed one would take
	// them until the kubelet evicts the pod).
	if l := tmp.EmptyDir.SizeLimit; l == nil || l.Value() != runtime.TmpSize || tmp.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("/tmp's sizeLimit %v, medium %q: want %d bytes of memory", l, tmp.EmptyDir.Medium, runtime.TmpSize)
	}
}

// TestSeccompProfile: with Options.SeccompProfile every container and the pod run under that
// Localhost profile (the list's, installed on the node); without, the runtime's default.
func TestSeccompProfile(t *testing.T) {
	o := testOptions()
	o.SeccompProfile = "agentplane/agent.json"
	spec := mustSTS(t, testDesired(), o).Spec.Template.Spec
	profiles := []*corev1.SeccompProfile{spec.SecurityContext.SeccompProfile}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		profiles = append(profiles, c.SecurityContext.SeccompProfile)
	}
	for _, p := range profiles {
		if p == nil || p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil || *p.LocalhostProfile != o.SeccompProfile {
			t.Errorf("seccomp profile %+v, want Localhost %s", p, o.SeccompProfile)
		}
	}
}

func TestProbes(t *testing.T) {
	routes := map[string]string{"startup": "/startupz", "liveness": "/healthz", "readiness": "/readyz"}
	probes := func(gw *corev1.Container) map[string]*corev1.Probe {
		return map[string]*corev1.Probe{"startup": gw.StartupProbe, "liveness": gw.LivenessProbe, "readiness": gw.ReadinessProbe}
	}
	// The official image: HTTP GETs of the engine's probe routes (503 while they do not hold).
	gw := container(t, mustSTS(t, testDesired(), testOptions()).Spec.Template.Spec, ContainerGateway)
	for name, p := range probes(&gw) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != routes[name] || p.HTTPGet.Port.String() != portName {
			t.Fatalf("%s probe %+v, want GET %s", name, p, routes[name])
		}
	}
	if budget := gw.StartupProbe.PeriodSeconds * gw.StartupProbe.FailureThreshold; budget < 120 {
		t.Errorf("startup probe allows %d s; boot takes up to 40 s and plugin installs more", budget)
	}
	if gw.Ports[0].ContainerPort != GatewayPort {
		t.Errorf("port %d", gw.Ports[0].ContainerPort)
	}
	// An image with a probe command: it is given each route's URL and reads the JSON body.
	o := testOptions()
	o.Probe = []string{"/usr/local/bin/agentplane-probe"}
	gw = container(t, mustSTS(t, testDesired(), o).Spec.Template.Spec, ContainerGateway)
	for name, p := range probes(&gw) {
		want := []string{"/usr/local/bin/agentplane-probe", fmt.Sprintf("http://127.0.0.1:%d%s", GatewayPort, routes[name])}
		if p == nil || p.Exec == nil || p.HTTPGet != nil || !slices.Equal(p.Exec.Command, want) {
			t.Fatalf("%s probe %+v, want exec %v", name, p, want)
		}
	}
}

func TestNoPlaintextSecrets(t *testing.T) {
	for _, withEnv := range []bool{true, false} {
		d := testDesired()
		if !withEnv {
			d.EnvSecret, d.Env = "", nil
		}
		o := testOptions()
		sts := mustSTS(t, d, o)
		svc, err := BuildService(testAgent(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range []any{sts, svc} {
			b, _ := json.Marshal(obj)
			if strings.Contains(string(b), testToken) || strings.Contains(string(b), "sk-attached-SECRET-value") {
				t.Errorf("%T carries a secret value: %s", obj, b)
			}
		}
		gw := container(t, sts.Spec.Template.Spec, ContainerGateway)
		var tok *corev1.EnvVar
		for i, e := range gw.Env {
			if e.Name == TokenEnv {
				tok = &gw.Env[i]
			}
		}
		if tok == nil || tok.Value != "" || tok.ValueFrom == nil || tok.ValueFrom.SecretKeyRef == nil ||
			tok.ValueFrom.SecretKeyRef.Name != d.GatewayTokenSecret || tok.ValueFrom.SecretKeyRef.Key != TokenKey {
			t.Errorf("token env %+v", tok)
		}
		switch {
		case withEnv && (len(gw.EnvFrom) != 1 || gw.EnvFrom[0].SecretRef == nil || gw.EnvFrom[0].SecretRef.Name != "a1-env"):
			t.Errorf("envFrom %+v", gw.EnvFrom)
		case !withEnv && len(gw.EnvFrom) != 0:
			t.Errorf("envFrom without an env secret: %+v", gw.EnvFrom)
		}
		seed := container(t, sts.Spec.Template.Spec, ContainerSeed)
		if len(seed.Env) != 1 || seed.Env[0].Name != SeedEnv ||
			!strings.Contains(seed.Env[0].Value, `"mode":"token"`) || strings.Contains(seed.Env[0].Value, `"token":`) {
			t.Errorf("seed config %+v", seed.Env)
		}
	}
}

func TestCommandEnvAndSeed(t *testing.T) {
	o := testOptions()
	o.StorageClass = "fast"
	o.StorageSize = resource.MustParse("7Gi")
	sts := mustSTS(t, testDesired(), o)
	spec := sts.Spec.Template.Spec
	gw := container(t, spec, ContainerGateway)
	wantCmd := []string{"node", "/app/openclaw.mjs", "gateway", "run", "--port", "18789", "--bind", "lan", "--auth", "token"}
	if !reflect.DeepEqual(gw.Command, wantCmd) {
		t.Errorf("command %q", gw.Command)
	}
	if gw.Image != "ghcr.io/openclaw/openclaw:"+engine.PinnedVersion {
		t.Errorf("image %q", gw.Image)
	}
	env := map[string]string{}
	for _, e := range gw.Env {
		env[e.Name] = e.Value
	}
	if env["HOME"] != Home || env["OPENCLAW_HOME"] != Home || env["OPENCLAW_GATEWAY_PORT"] != "18789" {
		t.Errorf("env %v", env)
	}
	if gw.Resources.Requests.Cpu().String() != "500m" || gw.Resources.Requests.Memory().String() != "1536Mi" ||
		gw.Resources.Limits.Memory().String() != "2Gi" || !gw.Resources.Limits.Cpu().IsZero() {
		t.Errorf("resources %+v", gw.Resources)
	}
	if *spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("grace %d", *spec.TerminationGracePeriodSeconds)
	}
	seed := container(t, spec, ContainerSeed)
	wantArgs := []string{"/home/node/.openclaw/openclaw.json", "/home/node/.openclaw/workspace"}
	if seed.Command[0] != "sh" || !reflect.DeepEqual(seed.Args, wantArgs) || !strings.Contains(seed.Command[2], `test -e "$cfg" ||`) {
		t.Errorf("seed %q %q", seed.Command, seed.Args)
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0].Name != VolumeTmp {
		t.Errorf("volumes %+v: the home is the claim, the seed config is in the environment", spec.Volumes)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatal("want one volume claim template")
	}
	vct := sts.Spec.VolumeClaimTemplates[0]
	if vct.Name != VolumeHome || *vct.Spec.StorageClassName != "fast" || vct.Spec.Resources.Requests.Storage().String() != "7Gi" {
		t.Errorf("claim template %+v", vct)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || sts.Spec.ServiceName != GoverningService {
		t.Errorf("sts spec %+v", sts.Spec)
	}
}

func TestLabelsAndOwners(t *testing.T) {
	a, d, o := testAgent(), testDesired(), testOptions()
	sts := mustSTS(t, d, o)
	legacy, _ := BuildService(a, o)
	if legacy.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service clusterIP %q: headless, so agents take no address of the Service range", legacy.Spec.ClusterIP)
	}
	want := map[string]string{agentsv1.LabelAppName: "openclaw", agentsv1.LabelAppInstance: "a1", agentsv1.LabelAppManagedBy: "agentplane", agentsv1.LabelAgent: "a1"}
	for _, obj := range []client.Object{sts, legacy} {
		if !reflect.DeepEqual(obj.GetLabels(), want) {
			t.Errorf("%T labels %v", obj, obj.GetLabels())
		}
		refs := obj.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != a.UID || refs[0].Kind != "Agent" || refs[0].Name != "a1" ||
			refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T owner refs %+v", obj, refs)
		}
	}
	if !reflect.DeepEqual(sts.Spec.Template.Labels, want) {
		t.Errorf("pod labels %v", sts.Spec.Template.Labels)
	}
	sel, _ := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	podLabels := labels.Set(sts.Spec.Template.Labels)
	if !sel.Matches(podLabels) || !labels.SelectorFromSet(legacy.Spec.Selector).Matches(podLabels) {
		t.Error("selectors must match the pod labels")
	}
	if legacy.Spec.Ports[0].Port != GatewayPort || legacy.Name != "a1" {
		t.Errorf("legacy service %+v", legacy)
	}

	// The namespace's governing Service: headless, owned by no agent, selecting every gateway
	// pod of the namespace (this one and another agent's), and naming each by its pod.
	gov, err := BuildGoverningService("ws1", o)
	if err != nil {
		t.Fatal(err)
	}
	if gov.Name != GoverningService || gov.Namespace != "ws1" || gov.Spec.ClusterIP != corev1.ClusterIPNone || len(gov.OwnerReferences) != 0 {
		t.Errorf("governing service %+v", gov)
	}
	other := maps.Clone(podLabels)
	other[agentsv1.LabelAgent], other[agentsv1.LabelAppInstance] = "a2", "a2"
	govSel := labels.SelectorFromSet(gov.Spec.Selector)
	if !govSel.Matches(podLabels) || !govSel.Matches(labels.Set(other)) || govSel.Matches(labels.Set{agentsv1.LabelAgent: "a1"}) {
		t.Errorf("governing selector %v: every gateway pod, nothing else", gov.Spec.Selector)
	}
	if got := Endpoint(a, sts.Spec.ServiceName); got != "http://a1-0.agentplane-gateways.ws1.svc:18789" {
		t.Errorf("endpoint %s", got)
	}
}

func TestNamesAndImages(t *testing.T) {
	for _, tc := range []struct{ agent, svc string }{
		{"a1", "a1"},
		{"1abc", "agent-1abc"},
		{"0123456789012345678901234567890123456789012345678901234567", "agent-"},
	} {
		got := ServiceName(&agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: tc.agent}})
		if !strings.HasPrefix(got, tc.svc) || len(got) > 63 || (tc.svc != "agent-" && got != tc.svc) {
			t.Errorf("ServiceName(%q) = %q", tc.agent, got)
		}
	}
	for _, tc := range []struct{ tmpl, version, image string }{
		{DefaultImage, "2026.9.6", "ghcr.io/openclaw/openclaw:2026.9.6"},
		{"reg.local/oc:%s-slim", "1.2.3", "reg.local/oc:1.2.3-slim"},
		{"reg.local/pinned:1", "1.2.3", "reg.local/pinned:1"},
	} {
		if got := Image(tc.tmpl, tc.version); got != tc.image {
			t.Errorf("Image(%q) = %q", tc.tmpl, got)
		}
	}
	if v := versionFromImage(DefaultImage, "ghcr.io/openclaw/openclaw:2026.9.1"); v != "2026.9.1" {
		t.Errorf("versionFromImage = %q", v)
	}
	if v := versionFromImage(DefaultImage, "docker.io/other:1"); v != "" {
		t.Errorf("versionFromImage(other) = %q", v)
	}
}

func TestBuildRejects(t *testing.T) {
	long := testAgent()
	long.Name = strings.Repeat("a", MaxAgentNameLength+1)
	for _, tc := range []struct {
		name   string
		agent  *agentsv1.Agent
		mutate func(*runtime.Desired, *Options)
	}{
		{"no version", testAgent(), func(d *runtime.Desired, _ *Options) { d.EngineVersion = "" }},
		{"no token secret", testAgent(), func(d *runtime.Desired, _ *Options) { d.GatewayTokenSecret = "" }},
		{"no engine", testAgent(), func(_ *runtime.Desired, o *Options) { o.Engine = nil }},
		{"name too long", long, func(*runtime.Desired, *Options) {}},
	} {
		d, o := testDesired(), testOptions()
		tc.mutate(&d, &o)
		if _, err := BuildStatefulSet(tc.agent, d, o); err == nil {
			t.Errorf("%s: BuildStatefulSet succeeded", tc.name)
		}
	}
}

// TestInitAndHeapLimit: an init runs as PID 1 before the engine, and the Node heap is capped
// at runtime.HeapShare of the container's memory limit (V8 would size it from the host's memory).
func TestInitAndHeapLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		init    []string
		limit   string
		wantCmd []string
		wantOpt string
	}{
		{"default", nil, "", []string{"node", "/app/openclaw.mjs"}, "--max-old-space-size=1536 --max-semi-space-size=4"},
		{"tini, 4Gi", []string{"/sbin/tini", "--"}, "4Gi", []string{"/sbin/tini", "--", "node", "/app/openclaw.mjs"}, "--max-old-space-size=3072 --max-semi-space-size=4"},
		{"odd limit", nil, "1000M", []string{"node", "/app/openclaw.mjs"}, "--max-old-space-size=715 --max-semi-space-size=4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			o.Init = tc.init
			if tc.limit != "" {
				o.MemoryLimit = resource.MustParse(tc.limit)
			}
			gw := container(t, mustSTS(t, testDesired(), o).Spec.Template.Spec, ContainerGateway)
			if got := gw.Command[:len(tc.wantCmd)]; !reflect.DeepEqual(got, tc.wantCmd) || gw.Command[len(tc.wantCmd)] != "gateway" {
				t.Errorf("command %q, want it to start with %q then gateway", gw.Command, tc.wantCmd)
			}
			// The heap settings, then the idle collector (runtime.GatewayNodeEnv).
			if opts := envValue(gw, "NODE_OPTIONS"); !strings.HasPrefix(opts, tc.wantOpt+" --import=data:text/javascript,") {
				t.Errorf("NODE_OPTIONS %q, want %q then the idle collector's --import", opts, tc.wantOpt)
			}
		})
	}
}

// TestPlacement: the platform's node selector and tolerations reach every gateway pod, as
// copies (one agent's template cannot change another's).
func TestPlacement(t *testing.T) {
	pool := []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "agents", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name        string
		selector    map[string]string
		tolerations []corev1.Toleration
	}{
		{"anywhere", nil, nil},
		{"selector only", map[string]string{"pool": "agents"}, nil},
		{"tainted pool", map[string]string{"pool": "agents", "zone": "a"}, pool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			o.NodeSelector, o.Tolerations = tc.selector, tc.tolerations
			spec := mustSTS(t, testDesired(), o).Spec.Template.Spec
			if !reflect.DeepEqual(spec.NodeSelector, tc.selector) {
				t.Errorf("nodeSelector %v, want %v", spec.NodeSelector, tc.selector)
			}
			if !reflect.DeepEqual(spec.Tolerations, tc.tolerations) {
				t.Errorf("tolerations %v, want %v", spec.Tolerations, tc.tolerations)
			}
			if len(spec.NodeSelector) > 0 {
				spec.NodeSelector["zone"] = "changed"
				if o.NodeSelector["zone"] == "changed" {
					t.Error("the pod template shares the options' node selector")
				}
			}
		})
	}
}

func TestParseToleration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want corev1.Toleration
		err  bool
	}{
		{in: "kwok.x-k8s.io/node=fake:NoSchedule", want: corev1.Toleration{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}},
		{in: "dedicated:NoExecute", want: corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		{in: "pool=agents", want: corev1.Toleration{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "agents"}},
		{in: "pool", want: corev1.Toleration{Key: "pool", Operator: corev1.TolerationOpExists}},
		{in: "pool=agents:Sometimes", err: true},
		{in: "=agents:NoSchedule", err: true},
		{in: "pool=a b", err: true},
	} {
		got, err := ParseToleration(tc.in)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("ParseToleration(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// Attached secrets reach the gateway only through envFrom (the derived Secret); every value the
// platform sets is an explicit env entry, which Kubernetes lets win over envFrom for the same
// name, and a name that secrets may not take.
func TestGatewayEnvPlatformWinsOverSecrets(t *testing.T) {
	o := testOptions()
	o.Engine = openclaw.New()
	d := testDesired()
	d.Env = map[string]string{"HOME": "/evil", "NODE_OPTIONS": "--require /evil.js", "OPENCLAW_GATEWAY_TOKEN": "evil"}
	gw := container(t, mustSTS(t, d, o).Spec.Template.Spec, ContainerGateway)
	if len(gw.EnvFrom) != 1 || gw.EnvFrom[0].SecretRef == nil || gw.EnvFrom[0].SecretRef.Name != d.EnvSecret {
		t.Fatalf("envFrom %+v", gw.EnvFrom)
	}
	platform := maps.Clone(o.Engine.Env(Home, GatewayPort))
	platform["NODE_OPTIONS"], platform[TokenEnv] = "", ""
	for k, v := range o.Engine.GatewayCommand(engine.GatewayParams{Port: GatewayPort, Bind: "lan"}).Env {
		platform[k] = v
	}
	set := map[string]corev1.EnvVar{}
	for _, e := range gw.Env {
		set[e.Name] = e
		if !secrets.IsReservedEnvName(e.Name) {
			t.Errorf("the kube runtime sets %s for the gateway, which secrets.IsReservedEnvName does not reserve", e.Name)
		}
		if strings.Contains(e.Value, "evil") {
			t.Errorf("%s = %q comes from a secret", e.Name, e.Value)
		}
	}
	for k := range platform {
		if _, ok := set[k]; !ok {
			t.Errorf("%s is not an explicit env entry: an attached secret could set it", k)
		}
	}
	if set[TokenEnv].ValueFrom == nil || set[TokenEnv].ValueFrom.SecretKeyRef.Name != d.GatewayTokenSecret {
		t.Errorf("token %+v", set[TokenEnv])
	}
}
