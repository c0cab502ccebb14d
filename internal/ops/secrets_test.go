package ops

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// TestAgentBoundCredentialSeesNoOtherAgent: the secrets an agent's own credential (its gateway
// or platform token) lists show, of the agents each secret is attached to, that agent alone;
// a user's token sees them all.
func TestAgentBoundCredentialSeesNoOtherAgent(t *testing.T) {
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "agt-a"},
		Spec: agentsv1.AgentSpec{Secrets: []agentsv1.LocalObjectReference{{Name: "sec-shared"}}}}
	sec := &agentsv1.AgentSecret{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "sec-shared"},
		Spec:   agentsv1.AgentSecretSpec{Name: "shared"},
		Status: agentsv1.AgentSecretStatus{AttachedTo: []string{"agt-a", "agt-b"}}}
	o, _ := fakeOps(Deps{}, a, sec)
	for _, tc := range []struct {
		scope Scope
		want  []string
	}{
		{Scope{Namespace: "ws", OnlyAgent: "agt-a"}, []string{"agt-a"}},
		{Scope{Namespace: "ws"}, []string{"agt-a", "agt-b"}},
	} {
		list, err := o.AgentSecrets(context.Background(), tc.scope, "agt-a")
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || !slices.Equal(list[0].Status.AttachedTo, tc.want) {
			t.Errorf("%+v: attachedTo %v, want %v", tc.scope, list, tc.want)
		}
	}
}
