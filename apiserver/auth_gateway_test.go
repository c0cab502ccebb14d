package apiserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

// TestGatewaySecretForAcrossReplicas: a gateway token rotated through another replica is
// accepted while this replica's cache still holds the previous value (the lookup falls back
// to the API server on a cache miss), and a token neither holds is refused.
func TestGatewaySecretForAcrossReplicas(t *testing.T) {
	secret := func(tok string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1-gateway-token", Labels: map[string]string{agentsv1.LabelGatewayTokenOf: "a1"}},
			Data:       map[string][]byte{agentsv1.GatewayTokenDataKey: []byte(tok)},
		}
	}
	index := func(o client.Object) []string { return nonEmptyLabel(o, agentsv1.LabelGatewayTokenOf) }
	sch := scheme.New()
	cache := fake.NewClientBuilder().WithScheme(sch).WithObjects(secret("old-token")).
		WithIndex(&corev1.Secret{}, IndexGatewayAgent, index).Build()
	live := fake.NewClientBuilder().WithScheme(sch).WithObjects(secret("new-token")).Build()
	s := &Server{opts: Options{Client: cache, APIReader: live}}

	for _, tc := range []struct {
		name, agent, token string
		found              bool
	}{
		{"cached value", "a1", "old-token", true},
		{"rotated elsewhere, cache behind", "a1", "new-token", true},
		{"neither holds it", "a1", "forged-token", false},
		{"another agent's path", "a2", "new-token", false},
		{"empty token", "a1", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := s.gatewaySecretFor(context.Background(), tc.agent, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if got := sec != nil; got != tc.found {
				t.Fatalf("found = %v, want %v", got, tc.found)
			}
			if sec != nil && sec.Namespace != "ws" {
				t.Fatalf("found a Secret in namespace %q", sec.Namespace)
			}
		})
	}
}

func nonEmptyLabel(o client.Object, key string) []string {
	if v := o.GetLabels()[key]; v != "" {
		return []string{v}
	}
	return nil
}
