package kube

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

var _ runtime.Watcher = (*Runtime)(nil)

// SetupWatches makes the Agent controller watch what this runtime creates: the agent's
// StatefulSet and Service (owned by the Agent) and its pod (by LabelAgent; the StatefulSet
// owns the pod). The Service is watched, and cached, as metadata: only its existence is read.
// With Network.Enabled the agent's NetworkPolicy is watched as metadata too (its fingerprint).
func (r *Runtime) SetupWatches(b *builder.Builder) *builder.Builder {
	b = b.Owns(&appsv1.StatefulSet{}).Owns(&corev1.Service{}, builder.OnlyMetadata).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToAgent))
	if r.opts.Network.Enabled {
		b = b.Owns(&networkingv1.NetworkPolicy{}, builder.OnlyMetadata)
	}
	return b
}

// podToAgent maps an agent's pod to the agent.
func podToAgent(_ context.Context, o client.Object) []reconcile.Request {
	if a := o.GetLabels()[agentsv1.LabelAgent]; a != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: a}}}
	}
	return nil
}

// CacheByObject restricts a manager's cache of the kinds this runtime watches to the objects
// agentplane manages (byObject is cache.Options.ByObject).
func CacheByObject(byObject map[client.Object]cache.ByObject) {
	managed := labels.SelectorFromSet(labels.Set{agentsv1.LabelAppManagedBy: agentsv1.ManagedBy})
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.Service{}, &corev1.ConfigMap{}, &networkingv1.NetworkPolicy{}} {
		byObject[o] = cache.ByObject{Label: managed}
	}
	// A StatefulSet is read for its annotations, replicas and claim templates, never for its
	// pod template (Ensure builds that, and applies it server-side; observe reads the pod) or
	// its managedFields: the cache leaves them out, most of the cached objects' bytes (a
	// transform of its own replaces the cache's default, which strips managedFields).
	byObject[&appsv1.StatefulSet{}] = cache.ByObject{Label: managed, Transform: trimStatefulSet}
	// Nodes are read for their Ready condition alone (observe): the cache keeps that, not their
	// images, addresses and capacity.
	byObject[&corev1.Node{}] = cache.ByObject{Transform: nodeReadiness}
}

// trimStatefulSet drops a StatefulSet's pod template and managedFields.
func trimStatefulSet(o any) (any, error) {
	if sts, ok := o.(*appsv1.StatefulSet); ok {
		sts.Spec.Template = corev1.PodTemplateSpec{}
		sts.ManagedFields = nil
	}
	return o, nil
}

// nodeReadiness keeps of a Node what the runtime reads: its name and conditions.
func nodeReadiness(o any) (any, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Status:     corev1.NodeStatus{Conditions: n.Status.Conditions},
	}, nil
}
