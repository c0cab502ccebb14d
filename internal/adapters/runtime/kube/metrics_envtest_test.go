package kube_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// podMetricsCRD serves metrics.k8s.io's PodMetrics from the test's API server, as
// metrics-server's aggregated API would.
func podMetricsCRD() *apiextensionsv1.CustomResourceDefinition {
	yes := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "pods.metrics.k8s.io",
			Annotations: map[string]string{"api-approved.kubernetes.io": "unapproved, the metrics API's shape for a test"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "metrics.k8s.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "pods", Singular: "pod", Kind: "PodMetrics", ListKind: "PodMetricsList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &yes}}}},
		},
	}
}

// The fleet view's memory and CPU on the kube runtime: nothing without the metrics API, the
// gateway container's usage (and the pod's memory limit) with it.
func TestUsageReadsTheMetricsAPIWhereServed(t *testing.T) {
	ctx, a := setup(t, "metrics-usage")
	a.Spec.Resources = &agentsv1.AgentResources{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}}
	other := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: "a2"}}
	r := newRuntime(kube.Options{})
	if got := r.Usage(ctx, a.Namespace, []*agentsv1.Agent{a, other}); len(got) != 0 {
		t.Fatalf("measured without a metrics API: %+v", got)
	}

	crd := podMetricsCRD()
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	pm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
		"metadata":  map[string]any{"name": kube.PodName(a), "namespace": a.Namespace},
		"timestamp": time.Now().UTC().Format(time.RFC3339), "window": "15s",
		"containers": []any{
			map[string]any{"name": "seed", "usage": map[string]any{"cpu": "0", "memory": "1Mi"}},
			map[string]any{"name": kube.ContainerGateway, "usage": map[string]any{"cpu": "250m", "memory": "300Mi"}},
		},
	}}
	// The API is served once the CRD is established and discovered.
	if err := envtest.WaitForCRDs(env.Config, []*apiextensionsv1.CustomResourceDefinition{crd},
		envtest.CRDInstallOptions{MaxTime: testenv.EventBound, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatalf("PodMetrics never served: %v", err)
	}
	if err := env.Client.Create(ctx, pm); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testenv.EventBound)
	// The reader's REST mapper learns the new kind on its own (polled, not slept on).
	var got map[string]runtime.ResourceUsage
	for got = r.Usage(ctx, a.Namespace, []*agentsv1.Agent{a, other}); len(got) == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		got = r.Usage(ctx, a.Namespace, []*agentsv1.Agent{a, other})
	}
	u, ok := got[a.Name]
	if !ok || len(got) != 1 {
		t.Fatalf("usage: %+v", got)
	}
	if u.MemoryBytes != 300<<20 || u.MemoryLimitBytes != 3<<30 || !u.CPURateKnown || u.CPUCores != 0.25 || u.CPUKnown {
		t.Errorf("a1's usage: %+v", u)
	}
}
