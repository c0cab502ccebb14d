package kube

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Names inside the pod.
const (
	ContainerGateway = "gateway"
	ContainerSeed    = "seed-config"
	VolumeHome       = "home"
	VolumeTmp        = "tmp"
	// SeedEnv carries the seed config into the seed container (no ConfigMap per agent).
	SeedEnv  = "AGENTPLANE_SEED_CONFIG"
	TokenEnv = "OPENCLAW_GATEWAY_TOKEN"
	TokenKey = "token"
	portName = "gateway"
	nodeUID  = int64(1000)
	// MaxAgentNameLength: the StatefulSet controller labels pods with
	// "<name>-<10 char hash>", which must fit a 63 character label value.
	MaxAgentNameLength = 52
)

// seedScript writes the seed config ($AGENTPLANE_SEED_CONFIG) into the home only when no
// config exists yet, so edits made later (config set, channels, token) survive restarts.
const seedScript = `set -e
cfg=$1; ws=$2
mkdir -p "$(dirname "$cfg")" "$ws"
test -e "$cfg" || { (umask 077 && printf '%s' "$` + SeedEnv + `" > "$cfg.seed-tmp") && mv -f "$cfg.seed-tmp" "$cfg"; }`

func checkDesired(a *agentsv1.Agent, d runtime.Desired, o Options) error {
	switch {
	case o.Engine == nil:
		return errors.New("kube runtime: no engine")
	case len(a.Name) > MaxAgentNameLength:
		return fmt.Errorf("kube runtime: agent name %q is longer than %d characters", a.Name, MaxAgentNameLength)
	case d.EngineVersion == "":
		return errors.New("kube runtime: no engine version")
	case d.GatewayTokenSecret == "":
		return errors.New("kube runtime: no gateway token secret")
	}
	return nil
}

func objectMeta(a *agentsv1.Agent, name string, o Options) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: Labels(a, o.Engine.Name())}
}

func own(a *agentsv1.Agent, obj client.Object, o Options) error {
	if err := controllerutil.SetControllerReference(a, obj, o.Scheme); err != nil {
		return fmt.Errorf("owner reference: %w", err)
	}
	return nil
}

// seedConfig is the engine's initial config for the agent, without the gateway token (the
// gateway reads it from OPENCLAW_GATEWAY_TOKEN).
func seedConfig(d runtime.Desired, o Options) (string, error) {
	cfg, err := o.Engine.InitialConfig(d.Identity, "")
	if err != nil {
		return "", fmt.Errorf("initial config: %w", err)
	}
	return string(cfg), nil
}

// BuildGoverningService is namespace ns's GoverningService: headless (no address of the
// cluster's finite Service range), selecting every gateway pod of the namespace so that each
// has its DNS name. It belongs to no agent: it serves them all, and goes with the namespace.
func BuildGoverningService(ns string, o Options) (*corev1.Service, error) {
	o = o.withDefaults()
	if o.Engine == nil {
		return nil, errors.New("kube runtime: no engine")
	}
	gateways := map[string]string{agentsv1.LabelAppName: o.Engine.Name(), agentsv1.LabelAppManagedBy: agentsv1.ManagedBy}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: GoverningService, Namespace: ns, Labels: gateways},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Selector:  gateways,
			Ports: []corev1.ServicePort{{
				Name: portName, Port: GatewayPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString(portName),
			}},
		},
	}, nil
}

// BuildService is the headless Service of its own that governs the StatefulSet of an agent
// made by an earlier version (ServiceName): kept for as long as that StatefulSet is.
func BuildService(a *agentsv1.Agent, o Options) (*corev1.Service, error) {
	o = o.withDefaults()
	if o.Engine == nil {
		return nil, errors.New("kube runtime: no engine")
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(a, ServiceName(a), o),
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selectorLabels(a),
			Ports: []corev1.ServicePort{{
				Name: portName, Port: GatewayPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString(portName),
			}},
		},
	}
	return svc, own(a, svc, o)
}

// BuildStatefulSet runs the gateway: one replica (none when stopped) with the home volume.
func BuildStatefulSet(a *agentsv1.Agent, d runtime.Desired, o Options) (*appsv1.StatefulSet, error) {
	o = o.withDefaults()
	sts, err := buildStatefulSet(a, d, o)
	if err != nil {
		return nil, err
	}
	return sts, own(a, sts, o)
}

// buildStatefulSet is BuildStatefulSet without the owner (a pool member's is the pool).
func buildStatefulSet(a *agentsv1.Agent, d runtime.Desired, o Options) (*appsv1.StatefulSet, error) {
	if err := checkDesired(a, d, o); err != nil {
		return nil, err
	}
	replicas := int32(1)
	if d.Stopped {
		replicas = 0
	}
	image := Image(o.Image, d.EngineVersion)
	seed, err := seedContainer(d, o, image)
	if err != nil {
		return nil, err
	}
	gateway := gatewayContainer(a, d, o, image)
	labels := Labels(a, o.Engine.Name())
	if adopted(a) {
		labels[LabelPoolMember] = memberID(StatefulSetName(a))
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: objectMeta(a, StatefulSetName(a), o),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			Selector:    &metav1.LabelSelector{MatchLabels: selectorLabels(a)},
			ServiceName: GoverningService,
			// Parallel: a crash-looping pod of an old revision is replaced by the next rollout
			// (OrderedReady waits forever for it to become Ready).
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// OnDelete: the runtime decides when the pod restarts (settlePod), so a manager
			// that renders pods differently restarts none at once.
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			RevisionHistoryLimit: ptr.To[int32](3),
			// Retain: the home goes only with runtime.Delete (the agent deleted through the
			// platform), never with the StatefulSet: the garbage collector deletes that when the
			// Agent object is lost without a user deleting it (a restore of a stale backup).
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{agentsv1.AnnotationConfigHash: ConfigHash(d)},
				},
				Spec: corev1.PodSpec{
					InitContainers:                []corev1.Container{seed},
					Containers:                    []corev1.Container{gateway},
					SecurityContext:               podSecurity(o),
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To(int64(o.TerminationGracePeriod.Seconds())),
					RuntimeClassName:              runtimeClassName(d, o),
					NodeSelector:                  maps.Clone(o.NodeSelector),
					Tolerations:                   slices.Clone(o.Tolerations),
					Volumes: []corev1.Volume{
						// A tmpfs of runtime.TmpSize, as on the local runtime: a write past it
						// fails with ENOSPC (a disk-backed emptyDir takes it and the kubelet
						// evicts the pod later); its pages count in the pod's memory limit.
						{Name: VolumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
							Medium:    corev1.StorageMediumMemory,
							SizeLimit: resource.NewQuantity(runtime.TmpSize, resource.BinarySI),
						}}},
					},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{homeClaim(labels, o)},
		},
	}
	if adopted(a) {
		adoptedShape(sts, a)
	}
	return sts, nil
}

// gatewayContainer is the container that runs the agent's gateway from image.
func gatewayContainer(a *agentsv1.Agent, d runtime.Desired, o Options, image string) corev1.Container {
	gw := o.Engine.GatewayCommand(engine.GatewayParams{Port: GatewayPort, Bind: "lan"})
	resources := gatewayResources(o, a.Spec.Resources)
	command := append(append(append([]string{}, o.Init...), o.EngineCommand...), gw.Args...)
	gateway := corev1.Container{
		Name:            ContainerGateway,
		Image:           image,
		ImagePullPolicy: corev1.PullPolicy(o.ImagePullPolicy),
		Command:         command,
		Env:             gatewayEnv(o.Engine.Env(Home, GatewayPort), gw.Env, heapEnv(resources.Limits[corev1.ResourceMemory]), d.GatewayTokenSecret),
		Ports:           []corev1.ContainerPort{{Name: portName, ContainerPort: GatewayPort, Protocol: corev1.ProtocolTCP}},
		Resources:       resources,
		SecurityContext: containerSecurity(o),
		VolumeMounts: []corev1.VolumeMount{
			{Name: VolumeHome, MountPath: Home},
			{Name: VolumeTmp, MountPath: "/tmp"},
		},
		// The startup probe follows the boot closely (each second): an agent is Running once
		// its pod is Ready, and the readiness probe only runs once the startup probe passed, so
		// their periods add up to the delay between the engine being ready and the agent
		// reported Running. It gives a boot 10 minutes: boot takes 5-40 s on an idle node and
		// plugin installs more, but on a starved node (a 2-core machine at load 15) it took
		// over 3 minutes, and a kill there only starts the boot over (the old 3-minute budget
		// restarted gateways that never came up and halted a rollout). A gateway that exits
		// restarts at once whatever this says; liveness takes over once it started.
		StartupProbe:   probe(o.Probe, routeStartup, 1, 1, 600),
		LivenessProbe:  probe(o.Probe, routeLive, 15, 5, 4),
		ReadinessProbe: probe(o.Probe, routeReady, 2, 2, 8),
	}
	// Attached secrets come only through envFrom: every value the platform sets is in Env,
	// which Kubernetes applies after envFrom (an Env entry wins over an envFrom key of the same
	// name), so no secret overrides one even if its name slipped past the reserved list.
	if d.EnvSecret != "" {
		gateway.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: d.EnvSecret},
		}}}
	}
	return gateway
}

// seedContainer is the init container that seeds the engine's config and workspace in the
// agent's home from image.
func seedContainer(d runtime.Desired, o Options, image string) (corev1.Container, error) {
	seedCfg, err := seedConfig(d, o)
	if err != nil {
		return corev1.Container{}, err
	}
	layout := o.Engine.Layout()
	return corev1.Container{
		Name:    ContainerSeed,
		Image:   image,
		Command: []string{"sh", "-c", seedScript, "seed-config"},
		Args: []string{
			path.Join(Home, layout.ConfigPath),
			path.Join(Home, layout.WorkspaceDir),
		},
		Env:             []corev1.EnvVar{{Name: SeedEnv, Value: seedCfg}},
		ImagePullPolicy: corev1.PullPolicy(o.ImagePullPolicy),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: mustQ("10m"), corev1.ResourceMemory: mustQ("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: mustQ("64Mi")},
		},
		SecurityContext: containerSecurity(o),
		VolumeMounts: []corev1.VolumeMount{
			{Name: VolumeHome, MountPath: Home},
		},
	}, nil
}

// runtimeClassName is the agent's (or its workspace's) RuntimeClass, else the platform's
// default, else none.
func runtimeClassName(d runtime.Desired, o Options) *string {
	if d.RuntimeClassName != "" {
		return ptr.To(d.RuntimeClassName)
	}
	if o.RuntimeClassName != "" {
		return ptr.To(o.RuntimeClassName)
	}
	return nil
}

func homeClaim(labels map[string]string, o Options) corev1.PersistentVolumeClaim {
	pvc := corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: VolumeHome, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: o.StorageSize},
			},
		},
	}
	if o.StorageClass != "" {
		pvc.Spec.StorageClassName = ptr.To(o.StorageClass)
	}
	return pvc
}

// gatewayEnv is the engine environment (sorted, for a stable pod template) plus the gateway
// token from its Secret. The token is never a literal value.
func gatewayEnv(engineEnv, cmdEnv, heap map[string]string, tokenSecret string) []corev1.EnvVar {
	all := map[string]string{}
	for _, m := range []map[string]string{engineEnv, cmdEnv, heap} {
		for k, v := range m {
			all[k] = v
		}
	}
	delete(all, TokenEnv)
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]corev1.EnvVar, 0, len(keys)+1)
	for _, k := range keys {
		env = append(env, corev1.EnvVar{Name: k, Value: all[k]})
	}
	return append(env, corev1.EnvVar{Name: TokenEnv, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: tokenSecret},
			Key:                  TokenKey,
		},
	}})
}

// heapEnv caps the gateway's Node heap at runtime.HeapShare of the container's memory limit, with the
// rest of the platform's Node settings for a small idle gateway (runtime.GatewayNodeEnv).
func heapEnv(limit resource.Quantity) map[string]string {
	return runtime.GatewayNodeEnv(runtime.HeapMiB(limit.Value()))
}

// gatewayResources are the platform's defaults overridden by the agent's own values; a request
// above its limit raises the limit to it (the pod would be invalid otherwise).
func gatewayResources(o Options, own *agentsv1.AgentResources) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: o.CPURequest, corev1.ResourceMemory: o.MemoryRequest},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: o.MemoryLimit, corev1.ResourceEphemeralStorage: EphemeralStorageLimit},
	}
	if !o.CPULimit.IsZero() {
		r.Limits[corev1.ResourceCPU] = o.CPULimit
	}
	if own == nil {
		return r
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := own.Requests[name]; ok {
			r.Requests[name] = q
		}
		if q, ok := own.Limits[name]; ok {
			r.Limits[name] = q
		}
		if req, limit := r.Requests[name], r.Limits[name]; !limit.IsZero() && req.Cmp(limit) > 0 {
			r.Limits[name] = req
		}
	}
	return r
}

// The engine's probe routes: each answers JSON ({"ok":true,"status":"live"}, {"ready":true},
// ...) and 503 while it does not hold.
const (
	routeLive    = "/healthz"
	routeReady   = "/readyz"
	routeStartup = "/startupz"
)

// probe checks the engine's route: with the exec command cmd (given the route's URL) when
// set, else with an HTTP GET.
func probe(cmd []string, route string, period, timeout, failures int32) *corev1.Probe {
	p := &corev1.Probe{
		PeriodSeconds:    period,
		TimeoutSeconds:   timeout,
		FailureThreshold: failures,
		SuccessThreshold: 1,
	}
	if len(cmd) > 0 {
		url := fmt.Sprintf("http://127.0.0.1:%d%s", GatewayPort, route)
		p.Exec = &corev1.ExecAction{Command: append(slices.Clone(cmd), url)}
		return p
	}
	p.HTTPGet = &corev1.HTTPGetAction{Path: route, Port: intstr.FromString(portName), Scheme: corev1.URISchemeHTTP}
	return p
}

func podSecurity(o Options) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(nodeUID),
		RunAsGroup:          ptr.To(nodeUID),
		FSGroup:             ptr.To(nodeUID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      seccompProfile(o),
	}
}

// seccompProfile is the gateway pods' seccomp profile: Options.SeccompProfile on the node
// (Localhost: the list's profile, syscallpolicy.Profile) or the container runtime's default.
func seccompProfile(o Options) *corev1.SeccompProfile {
	if o.SeccompProfile != "" {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(o.SeccompProfile)}
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

func containerSecurity(o Options) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To(nodeUID),
		RunAsGroup:               ptr.To(nodeUID),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           seccompProfile(o),
	}
}
