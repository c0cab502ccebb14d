package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// The metrics API (metrics-server's metrics.k8s.io) may be read, where the cluster serves it.
// +kubebuilder:rbac:groups=metrics.k8s.io,resources=pods,verbs=get;list

// PodMetricsList is the metrics API's list of pod usage.
var PodMetricsList = schema.GroupVersionKind{Group: "metrics.k8s.io", Version: "v1beta1", Kind: "PodMetricsList"}

var _ runtime.Meter = (*Runtime)(nil)

// Usage reads the gateway containers' memory (working set) and CPU from the metrics API, one
// list per call (runtime.Meter), with each agent's memory limit as its pod gets it. A cluster
// without the metrics API (or a manager not allowed to read it) measures nothing: every
// agent reads as not available.
func (r *Runtime) Usage(ctx context.Context, namespace string, agents []*agentsv1.Agent) map[string]runtime.ResourceUsage {
	out := map[string]runtime.ResourceUsage{}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(PodMetricsList)
	if err := r.opts.APIReader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return out
	}
	byPod := make(map[string]map[string]any, len(list.Items))
	for _, pm := range list.Items {
		containers, _, _ := unstructured.NestedSlice(pm.Object, "containers")
		for _, c := range containers {
			if c, ok := c.(map[string]any); ok && c["name"] == ContainerGateway {
				usage, _, _ := unstructured.NestedMap(c, "usage")
				byPod[pm.GetName()] = usage
			}
		}
	}
	for _, a := range agents {
		usage, ok := byPod[PodName(a)]
		if !ok {
			continue
		}
		mem, memOK := quantity(usage["memory"])
		if !memOK {
			continue
		}
		u := runtime.ResourceUsage{MemoryBytes: mem.Value()}
		limit := gatewayResources(r.opts, a.Spec.Resources).Limits[corev1.ResourceMemory]
		u.MemoryLimitBytes = limit.Value()
		if cpu, ok := quantity(usage["cpu"]); ok {
			u.CPUCores, u.CPURateKnown = float64(cpu.MilliValue())/1000, true
		}
		out[a.Name] = u
	}
	return out
}

func quantity(v any) (resource.Quantity, bool) {
	s, ok := v.(string)
	if !ok {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}
