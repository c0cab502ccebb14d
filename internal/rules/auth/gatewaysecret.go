package auth

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// GatewayTokenSecret is the gateway-token Secret of agent holding token (its creator makes
// agent its owner).
func GatewayTokenSecret(agent *agentsv1.Agent, token string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: agentsv1.GatewayTokenSecretName(agent.Name), Namespace: agent.Namespace,
			Labels: map[string]string{
				agentsv1.LabelGatewayTokenOf: agent.Name,
				"app.kubernetes.io/part-of":  "agentplane",
				"app.kubernetes.io/instance": agent.Name,
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{agentsv1.GatewayTokenDataKey: []byte(token)},
	}
}

// GatewayTokenIndex maps an agent's gateway-token Secret (labelled LabelGatewayTokenOf) to
// the GatewayTokenHash of the token it holds: the cache index agentsv1.IndexGatewayTokenHash
// that gateway tokens are resolved by.
func GatewayTokenIndex(o client.Object) []string {
	sec, ok := o.(*corev1.Secret)
	if !ok {
		return nil
	}
	tok := string(sec.Data[agentsv1.GatewayTokenDataKey])
	if sec.Labels[agentsv1.LabelGatewayTokenOf] == "" || tok == "" {
		return nil
	}
	return []string{GatewayTokenHash(tok)}
}
