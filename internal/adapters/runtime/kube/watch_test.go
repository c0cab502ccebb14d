package kube

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// TestNodeCacheKeepsReadiness: the manager's cache keeps a Node's name and conditions (what
// observe reads) and drops the rest (images, addresses, capacity: most of a Node's bytes).
func TestNodeCacheKeepsReadiness(t *testing.T) {
	byObject := map[client.Object]cache.ByObject{}
	CacheByObject(byObject)
	var transform func(any) (any, error)
	for o, b := range byObject {
		if _, ok := o.(*corev1.Node); ok {
			transform = b.Transform
		}
	}
	if transform == nil {
		t.Fatal("no transform for Nodes")
	}
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Message: "Kubelet stopped posting node status."}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"},
		Status: corev1.NodeStatus{Conditions: ready,
			Images:    []corev1.ContainerImage{{Names: []string{"agentplane.local/openclaw:" + engine.PinnedVersion}, SizeBytes: 1 << 28}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.2"}}},
	}
	got, err := transform(node)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "7"},
		Status: corev1.NodeStatus{Conditions: ready}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached node %+v, want %+v", got, want)
	}
	// Anything else (a deletion tombstone) passes through.
	tomb := "not a node"
	if got, err := transform(tomb); err != nil || got != tomb {
		t.Errorf("non-node: %v %v", got, err)
	}
}

// TestStatefulSetCacheDropsPodTemplate: the cache keeps what Ensure and observe read of a
// StatefulSet (annotations with the apply fingerprint, replicas, claim templates) and drops
// the pod template and the managedFields (its own transform replaces the cache's default).
func TestStatefulSetCacheDropsPodTemplate(t *testing.T) {
	byObject := map[client.Object]cache.ByObject{}
	CacheByObject(byObject)
	var b cache.ByObject
	for o, ob := range byObject {
		if _, ok := o.(*appsv1.StatefulSet); ok {
			b = ob
		}
	}
	if b.Transform == nil || b.Label == nil || b.Label.String() != "app.kubernetes.io/managed-by=agentplane" {
		t.Fatalf("StatefulSet cache: %+v", b)
	}
	sts, err := BuildStatefulSet(testAgent(), testDesired(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	sts.Annotations = map[string]string{"agentplane.io/applied": "fp"}
	sts.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "agentplane", Operation: metav1.ManagedFieldsOperationApply}}
	want := sts.DeepCopy()
	got, err := b.Transform(sts)
	if err != nil {
		t.Fatal(err)
	}
	kept := got.(*appsv1.StatefulSet)
	if len(kept.Spec.Template.Spec.Containers) != 0 {
		t.Error("the cached StatefulSet keeps its pod template")
	}
	if kept.ManagedFields != nil {
		t.Error("the cached StatefulSet keeps its managedFields")
	}
	if kept.Annotations["agentplane.io/applied"] != "fp" || *kept.Spec.Replicas != *want.Spec.Replicas ||
		!reflect.DeepEqual(kept.Spec.VolumeClaimTemplates, want.Spec.VolumeClaimTemplates) {
		t.Errorf("the cached StatefulSet lost what Ensure reads: %+v", kept)
	}
}
