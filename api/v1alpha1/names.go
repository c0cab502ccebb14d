package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ServiceNameFor is a Service name (a DNS-1035 label: it starts with a letter) for the object
// named name: name itself when valid, otherwise "<prefix>-<name>", or "<prefix>-<hash>" when
// that is too long.
func ServiceNameFor(prefix, name string) string {
	if len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	if n := prefix + "-" + name; len(validation.IsDNS1035Label(n)) == 0 {
		return n
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + "-" + hex.EncodeToString(sum[:12])
}

// GatewayPodSelector selects the gateway pod of the agent named agent (the kube runtime's
// StatefulSet selector, and the backend of the Services that route a Domain to it).
func GatewayPodSelector(agent string) map[string]string {
	return map[string]string{LabelAppInstance: agent, LabelAgent: agent}
}

// GatewayTokenSecretName is the core Secret that holds the gateway token of the agent named
// agent (an Agent's status.gatewayTokenSecret, once set, names the one in use).
func GatewayTokenSecretName(agent string) string { return agent + "-gateway-token" }

// EnvSecretName is the derived Secret with the environment of the agent named agent (kube).
func EnvSecretName(agent string) string { return agent + "-env" }

// KindAgent is the Agent kind, as owner references and events name it.
const KindAgent = "Agent"
