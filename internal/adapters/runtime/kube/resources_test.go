package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// TestAgentResources: an agent's own requests and limits override the platform's defaults
// value by value, a request above its limit raises the limit, the Node heap follows the
// memory limit the container gets, and what it writes outside its home is bounded.
func TestAgentResources(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name                     string
		own                      *agentsv1.AgentResources
		cpuReq, memReq, memLimit string
		cpuLimit                 string // "" = none
		heap                     string
	}{
		{name: "platform defaults", cpuReq: "500m", memReq: "1536Mi", memLimit: "2Gi", heap: "--max-old-space-size=1536 --max-semi-space-size=4"},
		{name: "own memory request and limit",
			own:    &agentsv1.AgentResources{Requests: corev1.ResourceList{"memory": q("3Gi")}, Limits: corev1.ResourceList{"memory": q("4Gi")}},
			cpuReq: "500m", memReq: "3Gi", memLimit: "4Gi", heap: "--max-old-space-size=3072 --max-semi-space-size=4"},
		{name: "a request above the default limit raises it",
			own:    &agentsv1.AgentResources{Requests: corev1.ResourceList{"memory": q("64Gi")}},
			cpuReq: "500m", memReq: "64Gi", memLimit: "64Gi", heap: "--max-old-space-size=49152 --max-semi-space-size=4"},
		{name: "own cpu request and limit, memory untouched",
			own:    &agentsv1.AgentResources{Requests: corev1.ResourceList{"cpu": q("2")}, Limits: corev1.ResourceList{"cpu": q("1")}},
			cpuReq: "2", memReq: "1536Mi", memLimit: "2Gi", cpuLimit: "2", heap: "--max-old-space-size=1536 --max-semi-space-size=4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAgent()
			a.Spec.Resources = tc.own
			sts, err := BuildStatefulSet(a, testDesired(), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			gw := container(t, sts.Spec.Template.Spec, ContainerGateway)
			r := gw.Resources
			for _, c := range []struct {
				what string
				got  resource.Quantity
				want string
			}{
				{"cpu request", r.Requests[corev1.ResourceCPU], tc.cpuReq},
				{"memory request", r.Requests[corev1.ResourceMemory], tc.memReq},
				{"memory limit", r.Limits[corev1.ResourceMemory], tc.memLimit},
				{"ephemeral-storage limit", r.Limits[corev1.ResourceEphemeralStorage], "4Gi"},
			} {
				if c.got.Cmp(q(c.want)) != 0 {
					t.Errorf("%s %s, want %s", c.what, c.got.String(), c.want)
				}
			}
			if got, ok := r.Limits[corev1.ResourceCPU]; ok != (tc.cpuLimit != "") || (ok && got.Cmp(q(tc.cpuLimit)) != 0) {
				t.Errorf("cpu limit %v (set %v), want %q", got.String(), ok, tc.cpuLimit)
			}
			// The heap settings, then the idle collector (runtime.GatewayNodeEnv).
			if heap := envValue(gw, "NODE_OPTIONS"); !strings.HasPrefix(heap, tc.heap+" --import=data:text/javascript,") {
				t.Errorf("NODE_OPTIONS %q, want %q then the idle collector's --import", heap, tc.heap)
			}
		})
	}
}

// envValue is the literal value of the environment variable name in c ("" when unset).
func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
