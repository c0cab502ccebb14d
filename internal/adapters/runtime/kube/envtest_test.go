package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = kubeenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func newRuntime(o kube.Options) *kube.Runtime {
	o.Client, o.APIReader, o.Scheme, o.RESTConfig = env.Client, env.Client, env.Scheme, env.Config
	o.Engine = kube.NewStubEngine()
	return kube.New(o)
}

func setup(t *testing.T, ns string) (context.Context, *agentsv1.Agent) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, kubeenv.Namespace(ns)); err != nil {
		t.Fatal(err)
	}
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a1", Namespace: ns},
		Spec: agentsv1.AgentSpec{DisplayName: "Agent One"}}
	if err := env.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	return ctx, a
}

func desired() runtime.Desired {
	return runtime.Desired{
		EngineVersion: engine.PinnedVersion, GatewayToken: "tok-1", GatewayTokenSecret: "a1-gateway-token",
		Env: map[string]string{"OPENAI_API_KEY": "sk-1"}, EnvSecret: "a1-env",
		Identity: engine.Identity{Name: "Agent One"},
	}
}

func ensure(t *testing.T, ctx context.Context, r *kube.Runtime, a *agentsv1.Agent, d runtime.Desired) runtime.Observed {
	t.Helper()
	o, err := r.Ensure(ctx, a, d)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return o
}

func owned(ns string) []client.Object {
	return []client.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a1"}}}
}

func governing(ns string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kube.GoverningService}}
}

func versions(t *testing.T, ctx context.Context, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, obj := range append(owned(ns), governing(ns)) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%T", obj)] = obj.GetResourceVersion()
	}
	return out
}

// podFor simulates what the StatefulSet controller and the kubelet would do: a pod from the
// current template (the home claim stands in as an emptyDir).
func podFor(t *testing.T, ctx context.Context, ns string) *corev1.Pod {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a1"}, sts); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: sts.Spec.Template.ObjectMeta, Spec: sts.Spec.Template.Spec}
	pod.Name, pod.Namespace = "a1-0", ns
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: kube.VolumeHome,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func setPodStatus(t *testing.T, ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = st
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureLifecycle(t *testing.T) {
	ctx, a := setup(t, "lifecycle")
	r := newRuntime(kube.Options{})
	d := desired()

	o := ensure(t, ctx, r, a, d)
	if o.Phase != runtime.PhaseStarting || o.Reason != agentsv1.ReasonPodNotCreated || o.Endpoint != "http://a1-0.agentplane-gateways.lifecycle.svc:18789" {
		t.Errorf("first observation %+v", o)
	}
	// The namespace's governing Service names the pod; the agent has no Service of its own.
	gov := governing("lifecycle")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gov), gov); err != nil {
		t.Fatalf("governing service: %v", err)
	}
	if gov.Spec.ClusterIP != corev1.ClusterIPNone || len(gov.OwnerReferences) != 0 {
		t.Errorf("governing service: clusterIP %q, owners %v: headless and nobody's", gov.Spec.ClusterIP, gov.OwnerReferences)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "lifecycle", Name: "a1"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Service of the agent's own: %v", err)
	}
	for _, obj := range owned("lifecycle") {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		refs := obj.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != a.UID || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T owner refs %+v", obj, refs)
		}
		if obj.GetLabels()[agentsv1.LabelAgent] != "a1" {
			t.Errorf("%T labels %v", obj, obj.GetLabels())
		}
	}

	// The same desired state writes nothing, even from a runtime whose new options only
	// touch immutable fields (the volume claim template is kept).
	before := versions(t, ctx, "lifecycle")
	ensure(t, ctx, r, a, d)
	if after := versions(t, ctx, "lifecycle"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("second Ensure wrote: %v -> %v", before, after)
	}
	bigger := newRuntime(kube.Options{StorageSize: resource.MustParse("50Gi")})
	ensure(t, ctx, bigger, a, d)
	if after := versions(t, ctx, "lifecycle"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Ensure with another storage size wrote: %v -> %v", before, after)
	}

	// The pod boots, becomes ready, crashes.
	pod := podFor(t, ctx, "lifecycle")
	gw := func(st corev1.ContainerState, ready bool, restarts int32, last corev1.ContainerState) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: kube.ContainerGateway, Image: "ghcr.io/openclaw/openclaw:" + engine.PinnedVersion,
			State: st, Ready: ready, RestartCount: restarts, LastTerminationState: last}}
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	setPodStatus(t, ctx, pod, corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}},
		ContainerStatuses: gw(running, false, 0, corev1.ContainerState{})})
	if o := ensure(t, ctx, r, a, d); o.Phase != runtime.PhaseStarting {
		t.Errorf("booting: %+v", o)
	}
	setPodStatus(t, ctx, pod, corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		ContainerStatuses: gw(running, true, 0, corev1.ContainerState{})})
	o = ensure(t, ctx, r, a, d)
	if o.Phase != runtime.PhaseRunning || o.EngineVersion != engine.PinnedVersion || !o.Since.Equal(now.Time) {
		t.Errorf("ready: %+v", o)
	}
	setPodStatus(t, ctx, pod, corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}},
		ContainerStatuses: gw(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=gateway"}}, false, 3,
			corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 78, Reason: "Error", FinishedAt: now}})})
	o = ensure(t, ctx, r, a, d)
	if o.Phase != runtime.PhaseCrashed || o.Reason != "CrashLoopBackOff" || o.Restarts != 3 || o.EngineVersion != "" {
		t.Errorf("crashed: %+v", o)
	}

	// A rotated token rolls the pod: the pod of the old template no longer counts.
	d.GatewayToken = "tok-2"
	o = ensure(t, ctx, r, a, d)
	if o.Phase != runtime.PhaseStarting || o.Reason != agentsv1.ReasonUpdating {
		t.Errorf("after rotation: %+v", o)
	}
	if after := versions(t, ctx, "lifecycle"); after["*v1.StatefulSet"] == before["*v1.StatefulSet"] ||
		after["*v1.Service"] != before["*v1.Service"] {
		t.Errorf("rotation should rewrite only the StatefulSet: %v -> %v", before, after)
	}

	// Stopped: replicas 0.
	d.Stopped = true
	o = ensure(t, ctx, r, a, d)
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "lifecycle", Name: "a1"}, sts); err != nil {
		t.Fatal(err)
	}
	if o.Phase != runtime.PhaseStopped || *sts.Spec.Replicas != 0 {
		t.Errorf("stopped: %+v replicas %d", o, *sts.Spec.Replicas)
	}
	d.Stopped = false
	if o := ensure(t, ctx, r, a, d); o.Phase == runtime.PhaseStopped {
		t.Errorf("started again: %+v", o)
	}
}

// TestCreatedStatefulSetIsAdopted: a StatefulSet is created with a plain create (cheaper for
// the API server than an apply); the first apply that follows adopts its fields, so a field
// the agent no longer needs (here the env Secret, once it has no environment) is removed as
// if the StatefulSet had been applied from the start.
func TestCreatedStatefulSetIsAdopted(t *testing.T) {
	ctx, a := setup(t, "adopt")
	r := newRuntime(kube.Options{})
	ensure(t, ctx, r, a, desired())
	sts := &appsv1.StatefulSet{}
	get := func() {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "adopt", Name: "a1"}, sts); err != nil {
			t.Fatal(err)
		}
	}
	get()
	if sts.Annotations[agentsv1.AnnotationCreated] != "true" || len(sts.Spec.Template.Spec.Containers[0].EnvFrom) != 1 {
		t.Fatalf("created: annotations %v, envFrom %+v", sts.Annotations, sts.Spec.Template.Spec.Containers[0].EnvFrom)
	}

	d := desired()
	d.Env, d.EnvSecret = nil, ""
	ensure(t, ctx, r, a, d)
	get()
	if envFrom := sts.Spec.Template.Spec.Containers[0].EnvFrom; len(envFrom) != 0 {
		t.Errorf("envFrom %+v kept after the agent lost its environment", envFrom)
	}
	if _, marked := sts.Annotations[agentsv1.AnnotationCreated]; marked {
		t.Error("the created mark outlives the first apply")
	}
	for _, m := range sts.ManagedFields {
		if m.Manager == kube.FieldManager && m.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("managedFields keep the create's entry: %+v", m)
		}
	}
	// Nothing changed: nothing is written.
	before := sts.ResourceVersion
	ensure(t, ctx, r, a, d)
	if get(); sts.ResourceVersion != before {
		t.Errorf("an Ensure without change wrote the StatefulSet (%s -> %s)", before, sts.ResourceVersion)
	}
}

// TestGoverningServiceIsShared: the agents of a namespace share its governing Service, made
// once; one deleted by hand comes back with the next Ensure that finds it missing.
func TestGoverningServiceIsShared(t *testing.T) {
	ctx, a := setup(t, "shared")
	r := newRuntime(kube.Options{})
	ensure(t, ctx, r, a, desired())
	gov := governing("shared")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(gov), gov); err != nil {
		t.Fatal(err)
	}
	a2 := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a2", Namespace: "shared"}, Spec: agentsv1.AgentSpec{DisplayName: "Agent Two"}}
	if err := env.Client.Create(ctx, a2); err != nil {
		t.Fatal(err)
	}
	d2 := desired()
	d2.GatewayTokenSecret, d2.EnvSecret = "a2-gateway-token", "a2-env"
	if o := ensure(t, ctx, r, a2, d2); o.Endpoint != "http://a2-0.agentplane-gateways.shared.svc:18789" {
		t.Errorf("second agent's endpoint %s", o.Endpoint)
	}
	again := governing("shared")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(again), again); err != nil {
		t.Fatal(err)
	}
	if again.UID != gov.UID || again.ResourceVersion != gov.ResourceVersion {
		t.Errorf("the second agent rewrote the governing Service (%s -> %s)", gov.ResourceVersion, again.ResourceVersion)
	}

	if err := env.Client.Delete(ctx, again); err != nil {
		t.Fatal(err)
	}
	ensure(t, ctx, newRuntime(kube.Options{}), a, desired())
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(again), again); err != nil || again.UID == gov.UID {
		t.Errorf("governing Service not made again: %v (uid %s)", err, again.UID)
	}
}

// TestLegacyAgentKeepsItsService: the StatefulSet of an agent made by an earlier version is
// governed by a Service of the agent's own (serviceName is immutable). Ensure keeps both, and
// replaces such a Service made with a ClusterIP (by an older version still) with a headless
// one, since the address cannot change in place.
func TestLegacyAgentKeepsItsService(t *testing.T) {
	ctx, a := setup(t, "legacy")
	r := newRuntime(kube.Options{})
	old := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "a1", Namespace: "legacy", Labels: map[string]string{agentsv1.LabelAgent: "a1"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{agentsv1.LabelAgent: "a1"},
			Ports: []corev1.ServicePort{{Name: "gateway", Port: kube.GatewayPort}}},
	}
	if err := env.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	if old.Spec.ClusterIP == "" || old.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("the old Service has no address: %q", old.Spec.ClusterIP)
	}
	sts, err := kube.BuildStatefulSet(a, desired(), kube.Options{Engine: kube.NewStubEngine(), Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	sts.Spec.ServiceName = "a1"
	if err := env.Client.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}

	if o := ensure(t, ctx, r, a, desired()); o.Endpoint != "http://a1-0.a1.legacy.svc:18789" {
		t.Errorf("endpoint %s: the pod under its own Service", o.Endpoint)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil || sts.Spec.ServiceName != "a1" {
		t.Errorf("statefulset serviceName %q (%v): kept", sts.Spec.ServiceName, err)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.UID == old.UID {
		t.Errorf("service clusterIP %q (uid %s, was %s): want a new headless Service", svc.Spec.ClusterIP, svc.UID, old.UID)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(governing("legacy")), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("a governing Service for a legacy agent alone: %v", err)
	}
}

func TestDelete(t *testing.T) {
	ctx, a := setup(t, "deletion")
	r := newRuntime(kube.Options{})
	ensure(t, ctx, r, a, desired())
	pod := podFor(t, ctx, "deletion")
	pvc := homeClaim(t, ctx, getStatefulSet(t, ctx, "deletion", "a1"))

	// The pod exists but its gateway does not run: no exec.
	if _, err := r.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("exec in a pod that does not run: %v", err)
	}

	// The seed ConfigMap an earlier version made for the agent goes too.
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a1-seed", Namespace: "deletion", Labels: pod.Labels}}
	if err := env.Client.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, obj := range append(owned("deletion"), &corev1.Pod{ObjectMeta: pod.ObjectMeta}, pvc, legacy) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		case obj.GetDeletionTimestamp() == nil:
			// The PVC keeps its protection finalizer until a controller removes it; being
			// deleted is what Delete can do.
			t.Errorf("%T %s not deleted", obj, obj.GetName())
		}
	}
	// An object that only has the name Delete would pick is left alone.
	stranger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a2-seed", Namespace: "deletion"}}
	if err := env.Client.Create(ctx, stranger); err != nil {
		t.Fatal(err)
	}
	a2 := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a2", Namespace: "deletion"}}
	if err := r.Delete(ctx, a2); err != nil {
		t.Errorf("Delete of an agent with nothing: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(stranger), stranger); err != nil {
		t.Errorf("unrelated object: %v", err)
	}
	if err := r.Delete(ctx, a); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if _, err := r.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("exec without a pod: %v", err)
	}
	if _, err := r.ReadFile(ctx, a, "x"); !errors.Is(err, runtime.ErrNotRunning) {
		t.Errorf("read without a pod: %v", err)
	}
}
