package kube_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

// runPod plays the StatefulSet controller and the kubelet until the agent's pod runs Ready,
// and returns it.
func runPod(t *testing.T, ctx context.Context, a *agentsv1.Agent) *corev1.Pod {
	t.Helper()
	for range 4 {
		playKubelet(t, env.Client, a)
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: kube.PodName(a)}, pod); err != nil {
		t.Fatalf("the agent's pod: %v", err)
	}
	if !ready(pod) {
		t.Fatalf("pod %s not Ready", pod.Name)
	}
	return pod
}

// podUID is the UID of the agent's pod ("" when there is none).
func podUID(t *testing.T, ctx context.Context, a *agentsv1.Agent) types.UID {
	t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: kube.PodName(a)}, pod); err != nil {
		return ""
	}
	return pod.UID
}

// newRendering is a manager that renders the gateway pod differently (another default cpu
// request and an exec probe).
func newRendering() *kube.Runtime {
	return newRuntime(kube.Options{CPURequest: resource.MustParse("250m"), Probe: []string{"probe"}})
}

// TestRenderingChangeWaitsForItsRollout: a manager that renders the pod differently restarts
// no pod by itself; the pod keeps running, reported on an outdated rendering, until the
// rendering is allowed; then the pod is replaced by one of the new rendering.
func TestRenderingChangeWaitsForItsRollout(t *testing.T) {
	ctx, a := setup(t, "rendering")
	d := desired()
	ensure(t, ctx, newRuntime(kube.Options{}), a, d)
	old := runPod(t, ctx, a)

	upgraded := newRendering()
	o := ensure(t, ctx, upgraded, a, d)
	playKubelet(t, env.Client, a)
	if podUID(t, ctx, a) != old.UID {
		t.Fatal("a new rendering alone restarted the pod")
	}
	if o.Phase != runtime.PhaseRunning || !o.RenderingOutdated || o.Rendering == "" || o.Rendering == old.Annotations[kube.AnnotationRendering] {
		t.Fatalf("on the old rendering: %+v (pod's %q)", o, old.Annotations[kube.AnnotationRendering])
	}
	// Allowing another rendering than the manager's restarts nothing either.
	d.AllowedRendering = old.Annotations[kube.AnnotationRendering]
	ensure(t, ctx, upgraded, a, d)
	if podUID(t, ctx, a) != old.UID {
		t.Fatal("a rendering other than the manager's was allowed")
	}

	d.AllowedRendering = o.Rendering
	if o := ensure(t, ctx, upgraded, a, d); o.Phase != runtime.PhaseStarting || o.Reason != agentsv1.ReasonPodTerminating {
		t.Errorf("while restarting onto the allowed rendering: %+v", o)
	}
	pod := runPod(t, ctx, a)
	if pod.UID == old.UID || pod.Annotations[kube.AnnotationRendering] != o.Rendering {
		t.Fatalf("after the allowed restart: pod %s rendering %q, want %q", pod.UID, pod.Annotations[kube.AnnotationRendering], o.Rendering)
	}
	if o := ensure(t, ctx, upgraded, a, d); o.Phase != runtime.PhaseRunning || o.RenderingOutdated {
		t.Errorf("on the new rendering: %+v", o)
	}
}

// TestAgentChangesRestartAtOnce: what the agent asks for (a rotated token, other resources)
// restarts the pod at once, also when its rendering is outdated, and the new pod runs the
// new rendering; a label the pod lost is put back without a restart.
func TestAgentChangesRestartAtOnce(t *testing.T) {
	ctx, a := setup(t, "agentchange")
	d := desired()
	ensure(t, ctx, newRuntime(kube.Options{}), a, d)
	old := runPod(t, ctx, a)

	// Labels only: patched in place.
	base := old.DeepCopy()
	delete(old.Labels, agentsv1.LabelAppInstance)
	if err := env.Client.Patch(ctx, old, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	r := newRuntime(kube.Options{})
	ensure(t, ctx, r, a, d)
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), pod); err != nil || pod.UID != old.UID {
		t.Fatalf("a label change restarted the pod: %v", err)
	}
	if pod.Labels[agentsv1.LabelAppInstance] != a.Name {
		t.Errorf("labels not patched in place: %v", pod.Labels)
	}

	// The agent's own change, under a manager with a new rendering: restarted now.
	upgraded := newRendering()
	d.GatewayToken = "tok-2"
	o := ensure(t, ctx, upgraded, a, d)
	if podUID(t, ctx, a) == old.UID || o.Reason != agentsv1.ReasonUpdating {
		t.Fatalf("a config change did not restart the pod at once: %+v", o)
	}
	pod = runPod(t, ctx, a)
	if pod.Annotations[kube.AnnotationRendering] != o.Rendering {
		t.Errorf("the restarted pod runs rendering %q, want %q", pod.Annotations[kube.AnnotationRendering], o.Rendering)
	}

	// Resources of the agent's own: restarted now as well.
	a.Spec.Resources = &agentsv1.AgentResources{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
	ensure(t, ctx, upgraded, a, d)
	if podUID(t, ctx, a) == pod.UID {
		t.Error("the agent's new resources did not restart the pod")
	}
}

// TestEarlierVersionPodIsKept: the StatefulSet of an earlier version (RollingUpdate, a pod
// without rendering) moves to OnDelete and its pod keeps running, on an outdated rendering.
func TestEarlierVersionPodIsKept(t *testing.T) {
	ctx, a := setup(t, "earlier")
	d := desired()
	sts, err := kube.BuildStatefulSet(a, d, kube.Options{Engine: kube.NewStubEngine(), Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	if err := env.Client.Create(ctx, sts, client.FieldOwner(kube.FieldManager)); err != nil {
		t.Fatal(err)
	}
	old := runPod(t, ctx, a)
	if _, ok := old.Annotations[kube.AnnotationRendering]; ok {
		t.Fatal("the earlier version's pod has a rendering")
	}

	o := ensure(t, ctx, newRuntime(kube.Options{}), a, d)
	playKubelet(t, env.Client, a)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
		t.Fatal(err)
	}
	if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("update strategy %q, want OnDelete", sts.Spec.UpdateStrategy.Type)
	}
	if podUID(t, ctx, a) != old.UID {
		t.Fatal("the earlier version's pod was restarted")
	}
	if o.Phase != runtime.PhaseRunning || !o.RenderingOutdated {
		t.Errorf("the earlier version's pod: %+v, want Running on an outdated rendering", o)
	}
}
