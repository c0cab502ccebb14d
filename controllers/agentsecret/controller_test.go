package agentsecret

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

// A secret whose environment name is reserved (one created before the name was; the CRD
// refuses new ones) is not Ready and says why; the others are (the agent package's
// TestReservedEnvSecretNotInjected: the agent is not given it).
func TestReservedEnvSecretNotReady(t *testing.T) {
	secret := func(name, envName string) *agentsv1.AgentSecret {
		return &agentsv1.AgentSecret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name},
			Spec: agentsv1.AgentSecretSpec{Name: name, EnvName: envName,
				SecretRef: &agentsv1.SecretKeyReference{Name: "core", Key: name}},
		}
	}
	core := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "core"},
		Data: map[string][]byte{"opts": []byte("--require /tmp/x.js"), "ld_preload": []byte("evil"), "openai": []byte("sk-ok")}}
	r := &Reconciler{APIReader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(core).Build()}
	for _, s := range []*agentsv1.AgentSecret{secret("opts", "NODE_OPTIONS"), secret("ld_preload", "")} {
		if cond := r.computeReadyCondition(context.Background(), s); cond.Status != metav1.ConditionFalse || cond.Reason != agentsv1.ReasonReservedEnvName {
			t.Errorf("%s: Ready %+v", s.Name, cond)
		}
	}
	if cond := r.computeReadyCondition(context.Background(), secret("openai", "OPENAI_API_KEY")); cond.Status != metav1.ConditionTrue {
		t.Errorf("openai: Ready %+v", cond)
	}
}
