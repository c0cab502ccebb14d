package kube

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/runtime"
)

var _ runtime.Watcher = (*Runtime)(nil)

// SetupWatches makes the Agent controller watch what this runtime creates: the agent's
// StatefulSet, Service and ConfigMap (owned by the Agent) and its pod (by LabelAgent; the
// StatefulSet owns the pod).
func (r *Runtime) SetupWatches(b *builder.Builder) *builder.Builder {
	return b.Owns(&appsv1.StatefulSet{}).Owns(&corev1.Service{}).Owns(&corev1.ConfigMap{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToAgent))
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
	for _, o := range []client.Object{&corev1.Pod{}, &appsv1.StatefulSet{}, &corev1.Service{}, &corev1.ConfigMap{}} {
		byObject[o] = cache.ByObject{Label: managed}
	}
}
