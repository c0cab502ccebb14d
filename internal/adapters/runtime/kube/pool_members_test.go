package kube

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// TestBuildMember: a member is an agent's StatefulSet without an agent: no agent label (no
// agent is woken by its pod), no identity, its token from its own Secret, selected by its id,
// updated OnDelete, owned by its pool without being its controller.
func TestBuildMember(t *testing.T) {
	gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "warm", UID: "uid-pool"}}
	sts, err := BuildMember(gp, "ws1", "abc123", engine.PinnedVersion, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if sts.Name != "pool-abc123" || sts.Namespace != "ws1" || sts.Spec.ServiceName != GoverningService {
		t.Errorf("name %s/%s, service %s", sts.Namespace, sts.Name, sts.Spec.ServiceName)
	}
	for _, l := range []map[string]string{sts.Labels, sts.Spec.Template.Labels, sts.Spec.VolumeClaimTemplates[0].Labels} {
		if l[agentsv1.LabelAgent] != "" || l[LabelPool] != "warm" || l[LabelPoolMember] != "abc123" || l[LabelPoolVersion] != engine.PinnedVersion ||
			l[agentsv1.LabelAppManagedBy] != agentsv1.ManagedBy {
			t.Errorf("labels %v", l)
		}
	}
	if m := sts.Spec.Selector.MatchLabels; len(m) != 1 || m[LabelPoolMember] != "abc123" {
		t.Errorf("selector %v", m)
	}
	if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("update strategy %s", sts.Spec.UpdateStrategy.Type)
	}
	if refs := sts.OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-pool" || refs[0].Kind != "GatewayPool" || refs[0].Controller != nil {
		t.Errorf("owners %+v", refs)
	}
	gw := container(t, sts.Spec.Template.Spec, ContainerGateway)
	tok := gw.Env[len(gw.Env)-1]
	if tok.Name != TokenEnv || tok.Value != "" || tok.ValueFrom.SecretKeyRef.Name != "pool-abc123-token" {
		t.Errorf("token env %+v", tok)
	}
	seed := container(t, sts.Spec.Template.Spec, ContainerSeed)
	if v := seed.Env[0].Value; strings.Contains(v, "pool-abc123") || strings.Contains(v, "token\":\"") {
		t.Errorf("seed config %s: no identity, no token", v)
	}
	sec := BuildMemberToken(gp, sts, "member-token")
	if sec.Name != "pool-abc123-token" || string(sec.Data[TokenKey]) != "member-token" || sec.OwnerReferences[0].UID != "uid-pool" {
		t.Errorf("token secret %+v", sec.ObjectMeta)
	}
}

// TestAdoptedStatefulSet: the StatefulSet of an agent that adopted a member keeps the
// member's name, selector and OnDelete, and carries the agent's labels and owner.
func TestAdoptedStatefulSet(t *testing.T) {
	a := testAgent()
	a.Annotations = map[string]string{AnnotationGatewaySet: "pool-abc123"}
	d := testDesired()
	sts, err := BuildStatefulSet(a, d, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	if sts.Name != "pool-abc123" || StatefulSetName(a) != "pool-abc123" || PodName(a) != "pool-abc123-0" || PVCName(a) != "home-pool-abc123-0" {
		t.Errorf("names %s %s %s %s", sts.Name, StatefulSetName(a), PodName(a), PVCName(a))
	}
	if got := Endpoint(a, GoverningService); got != "http://pool-abc123-0.agentplane-gateways.ws1.svc:18789" {
		t.Errorf("endpoint %s", got)
	}
	if m := sts.Spec.Selector.MatchLabels; len(m) != 1 || m[LabelPoolMember] != "abc123" {
		t.Errorf("selector %v", m)
	}
	for k, v := range agentsv1.GatewayPodSelector("a1") {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("template label %s=%q, want %q", k, sts.Spec.Template.Labels[k], v)
		}
	}
	if sts.Spec.Template.Labels[LabelPoolMember] != "abc123" || sts.Labels[LabelReservedFor] != "uid-a1" ||
		sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("labels %v, template labels %v, strategy %s", sts.Labels, sts.Spec.Template.Labels, sts.Spec.UpdateStrategy.Type)
	}
	if refs := sts.OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-a1" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("owners %+v", refs)
	}
}

func TestClaimable(t *testing.T) {
	o := testOptions()
	o.RuntimeClassName = "gvisor"
	bare := runtime.Desired{EngineVersion: engine.PinnedVersion}
	for _, c := range []struct {
		name string
		edit func(*agentsv1.Agent, *runtime.Desired)
		want bool
	}{
		{"new agent", func(*agentsv1.Agent, *runtime.Desired) {}, true},
		{"the platform's RuntimeClass", func(_ *agentsv1.Agent, d *runtime.Desired) { d.RuntimeClassName = "gvisor" }, true},
		{"stopped", func(_ *agentsv1.Agent, d *runtime.Desired) { d.Stopped = true }, false},
		{"environment", func(_ *agentsv1.Agent, d *runtime.Desired) { d.Env = map[string]string{"K": "v"} }, false},
		{"another RuntimeClass", func(_ *agentsv1.Agent, d *runtime.Desired) { d.RuntimeClassName = "kata" }, false},
		{"resources", func(a *agentsv1.Agent, _ *runtime.Desired) { a.Spec.Resources = &agentsv1.AgentResources{} }, false},
	} {
		a, d := testAgent(), bare
		c.edit(a, &d)
		if got := claimable(a, d, o); got != c.want {
			t.Errorf("%s: claimable %v", c.name, got)
		}
	}
}
