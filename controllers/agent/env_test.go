package agent

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

// A secret whose environment name is reserved (one created before the name was; the CRD
// refuses new ones) is not given to the agent; the others are (agentsecret's
// TestReservedEnvSecretNotReady: its Ready condition says why).
func TestReservedEnvSecretNotInjected(t *testing.T) {
	ref := func(name, secretName, envName string) *agentsv1.AgentSecret {
		return &agentsv1.AgentSecret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name},
			Spec: agentsv1.AgentSecretSpec{Name: secretName, EnvName: envName,
				SecretRef: &agentsv1.SecretKeyReference{Name: "core", Key: name}},
		}
	}
	core := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "core"},
		Data: map[string][]byte{"s1": []byte("--require /tmp/x.js"), "s2": []byte("evil"), "s3": []byte("sk-ok")}}
	s1, s2, s3 := ref("s1", "opts", "NODE_OPTIONS"), ref("s2", "ld_preload", ""), ref("s3", "openai", "OPENAI_API_KEY")
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(core, s1, s2, s3).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).Build()
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a1"},
		Spec: agentsv1.AgentSpec{Secrets: []agentsv1.LocalObjectReference{{Name: "s1"}, {Name: "s2"}, {Name: "s3"}}}}
	e := &SecretEnv{Client: c, APIReader: c}
	env, _, err := e.Resolve(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != 1 || env["OPENAI_API_KEY"] != "sk-ok" {
		t.Fatalf("env = %v", env)
	}
}
