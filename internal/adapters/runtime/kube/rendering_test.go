package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// TestRenderingDigest: the rendering changes with what the manager renders of the pod spec,
// never with its labels and annotations or the agent's initial config.
func TestRenderingDigest(t *testing.T) {
	base := renderingDigest(mustSTS(t, testDesired(), testOptions()).Spec.Template.Spec)
	for _, tc := range []struct {
		name    string
		opts    func(*Options)
		desired func(*runtime.Desired)
		tmpl    func(*corev1.PodTemplateSpec)
		changes bool
	}{
		{name: "same"},
		{name: "labels and annotations", tmpl: func(p *corev1.PodTemplateSpec) { p.Labels["new"], p.Annotations["new"] = "x", "y" }},
		{name: "identity (seed config)", desired: func(d *runtime.Desired) { d.Identity.Name = "Other" }},
		{name: "probe", opts: func(o *Options) { o.Probe = []string{"probe"} }, changes: true},
		{name: "default cpu request", opts: func(o *Options) { o.CPURequest = resource.MustParse("250m") }, changes: true},
		{name: "init step", tmpl: func(p *corev1.PodTemplateSpec) {
			p.Spec.InitContainers[0].Command = append(p.Spec.InitContainers[0].Command, "more")
		}, changes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, d := testOptions(), testDesired()
			if tc.opts != nil {
				tc.opts(&o)
			}
			if tc.desired != nil {
				tc.desired(&d)
			}
			tmpl := mustSTS(t, d, o).Spec.Template
			if tc.tmpl != nil {
				tc.tmpl(&tmpl)
			}
			if got := renderingDigest(tmpl.Spec); (got != base) != tc.changes {
				t.Errorf("rendering changed=%v, want %v", got != base, tc.changes)
			}
		})
	}
}

// TestPodSettings: the agent's own resources and RuntimeClass change its pod settings; the
// rest of its desired state does not.
func TestPodSettings(t *testing.T) {
	a, d := testAgent(), testDesired()
	base := podSettings(a, d)
	d.EngineVersion, d.Identity.Name = "2026.9.7", "Other"
	if podSettings(a, d) != base {
		t.Error("the version or identity changed the pod settings")
	}
	d.RuntimeClassName = "gvisor"
	if podSettings(a, d) == base {
		t.Error("a RuntimeClass of the agent's own did not change the pod settings")
	}
	a.Spec.Resources = &agentsv1.AgentResources{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	if podSettings(a, runtime.Desired{}) == podSettings(testAgent(), runtime.Desired{}) {
		t.Error("resources of the agent's own did not change the pod settings")
	}
}
