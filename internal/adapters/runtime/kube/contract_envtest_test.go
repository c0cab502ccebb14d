package kube_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube/kubetest"
	"github.com/agentplane/agentplane/internal/adapters/runtime/runtimetest"
)

// TestContract runs the runtime contract under envtest: the lifecycle promises, with
// playKubelet playing the StatefulSet controller and the kubelet. The promises about the home
// need a gateway that runs: test/e2e/realnode can run them (kubetest.Cluster without PlayKubelet).
func TestContract(t *testing.T) {
	rt := newRuntime(kube.Options{})
	runtimetest.Run(t, func(t *testing.T) *runtimetest.Fixture {
		return kubetest.Fixture(t, kubetest.Cluster{
			Runtime: rt, Client: env.Client, Layout: kube.NewStubEngine().Layout(),
			Version: engine.PinnedVersion, OtherVersion: "2026.9.7",
			PlayKubelet: func(t *testing.T, a *agentsv1.Agent) { playKubelet(t, env.Client, a) },
		})
	})
}

// playKubelet does, once, the next step the StatefulSet controller or the kubelet would take
// for the agent's StatefulSet (envtest runs neither): a pod of a set scaled to zero is
// deleted, and one of an older template when the set rolls its pods itself (RollingUpdate;
// OnDelete leaves that to the runtime); a missing pod is created from the current template,
// with its home claim; a created pod is marked running and Ready. The gateway never runs.
func playKubelet(t *testing.T, c client.Client, a *agentsv1.Agent) {
	t.Helper()
	ctx := t.Context()
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: kube.StatefulSetName(a)}, sts); err != nil {
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return
	}
	rev := revision(t, sts.Spec.Template)
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: kube.PodName(a)}, pod)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		t.Fatal(err)
	}
	scaledDown := sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0
	rolling := sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType
	switch {
	case pod != nil && pod.DeletionTimestamp != nil:
	case pod != nil && (scaledDown || (rolling && pod.Labels[appsv1.ControllerRevisionHashLabelKey] != rev)):
		// Not scheduled on a node: the API server deletes it at once.
		if err := c.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	case scaledDown:
	case pod == nil:
		createClaim(t, c, a, sts)
		createPod(t, c, a, sts, rev)
	case !ready(pod):
		markReady(t, c, pod)
	}
}

// revision stands in for the StatefulSet controller's revision hash of a pod template.
func revision(t *testing.T, tmpl corev1.PodTemplateSpec) string {
	t.Helper()
	raw, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:5])
}

// createClaim makes the pod's home claim from the set's claim template, as the StatefulSet
// controller does (envtest binds no volume: the pod gets an emptyDir in its place).
func createClaim(t *testing.T, c client.Client, a *agentsv1.Agent, sts *appsv1.StatefulSet) {
	t.Helper()
	if len(sts.Spec.VolumeClaimTemplates) == 0 {
		return
	}
	tmpl := sts.Spec.VolumeClaimTemplates[0]
	labels := maps.Clone(tmpl.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, sts.Spec.Selector.MatchLabels)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: kube.PVCName(a), Labels: labels},
		Spec:       tmpl.Spec,
	}
	if err := c.Create(t.Context(), pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, c client.Client, a *agentsv1.Agent, sts *appsv1.StatefulSet, rev string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = kube.PodName(a), a.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: kube.VolumeHome,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	if err := c.Create(t.Context(), pod); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func ready(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// markReady reports every container of the pod running and Ready, as the kubelet does once
// the probes pass.
func markReady(t *testing.T, c client.Client, pod *corev1.Pod) {
	t.Helper()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	for _, ctr := range pod.Spec.Containers {
		started := true
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if err := c.Status().Update(t.Context(), pod); err != nil && !apierrors.IsConflict(err) {
		t.Fatal(err)
	}
}
