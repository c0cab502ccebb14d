package policy_test

import (
	"strings"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/config/policy"
)

// The policy adds api/v1alpha1's finalizer, and its names are config/default's.
func TestLoad(t *testing.T) {
	if policy.AgentFinalizer != agentsv1.AgentFinalizer {
		t.Fatalf("policy.AgentFinalizer %q, api/v1alpha1 %q", policy.AgentFinalizer, agentsv1.AgentFinalizer)
	}
	p, err := policy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Mutating) != 1 || len(p.Bindings) != 1 {
		t.Fatalf("%d policies, %d bindings; want 1 and 1", len(p.Mutating), len(p.Bindings))
	}
	m, b := p.Mutating[0], p.Bindings[0]
	if m.Name != "agentplane-agent-finalizer" || b.Name != m.Name || b.Spec.PolicyName != m.Name {
		t.Errorf("policy %q, binding %q naming %q", m.Name, b.Name, b.Spec.PolicyName)
	}
	if len(m.Spec.Mutations) != 1 || m.Spec.Mutations[0].JSONPatch == nil ||
		!strings.Contains(m.Spec.Mutations[0].JSONPatch.Expression, `"`+agentsv1.AgentFinalizer+`"`) ||
		!strings.Contains(m.Spec.MatchConditions[0].Expression, `'`+agentsv1.AgentFinalizer+`'`) {
		t.Errorf("the policy does not add %s: %+v", agentsv1.AgentFinalizer, m.Spec)
	}
	if len(p.Objects()) != 2 {
		t.Errorf("Objects: %d, want 2", len(p.Objects()))
	}
}
