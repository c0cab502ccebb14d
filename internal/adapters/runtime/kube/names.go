package kube

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// AnnotationGatewaySet on an Agent names the StatefulSet of the warm pool member the agent
// adopted (`pool-<id>`). Written before the StatefulSet becomes the agent's, so every path
// (exec, files, logs, suspend, delete) follows the agent to it, and never removed.
const AnnotationGatewaySet = "agentplane.io/gateway-set"

// StatefulSetName is the agent's StatefulSet (the adopted pool member's, else the agent's
// name); its only pod is PodName.
func StatefulSetName(a *agentsv1.Agent) string {
	if n := a.Annotations[AnnotationGatewaySet]; n != "" {
		return n
	}
	return a.Name
}

// adopted reports whether the agent runs in a warm pool member it adopted.
func adopted(a *agentsv1.Agent) bool { return a.Annotations[AnnotationGatewaySet] != "" }

// PodName is the agent's pod (`<statefulset>-0`).
func PodName(a *agentsv1.Agent) string { return StatefulSetName(a) + "-0" }

// legacySeedConfigMapName held the seed config of agents made by earlier versions (Delete
// removes it).
func legacySeedConfigMapName(a *agentsv1.Agent) string { return a.Name + "-seed" }

// PVCName is the home volume the StatefulSet controller creates for the pod.
func PVCName(a *agentsv1.Agent) string { return VolumeHome + "-" + StatefulSetName(a) + "-0" }

// GoverningService is the headless Service of each namespace that governs the StatefulSets of
// all its agents: it gives every gateway pod its DNS name (`<agent>-0.agentplane-gateways.<ns>.svc`)
// for one object per namespace, where a Service per agent would cost a write per agent.
const GoverningService = "agentplane-gateways"

// ServiceName is the Service of its own that an agent made by an earlier version has (it
// governs that agent's StatefulSet, whose serviceName is immutable): the agent name when it is
// a valid Service name, otherwise "agent-<name>", or "agent-<hash>" when that is too long.
func ServiceName(a *agentsv1.Agent) string { return agentsv1.ServiceNameFor("agent", a.Name) }

// Endpoint is the gateway's base URL inside the cluster: its pod's name under the Service that
// governs its StatefulSet.
func Endpoint(a *agentsv1.Agent, governing string) string {
	return fmt.Sprintf("http://%s.%s.%s.svc:%d", PodName(a), governing, a.Namespace, GatewayPort)
}

// Labels are set on every object of the agent.
func Labels(a *agentsv1.Agent, engineName string) map[string]string {
	return map[string]string{
		agentsv1.LabelAppName:      engineName,
		agentsv1.LabelAppInstance:  a.Name,
		agentsv1.LabelAppManagedBy: agentsv1.ManagedBy,
		agentsv1.LabelAgent:        a.Name,
	}
}

// selectorLabels select the agent's pod; they are immutable on the StatefulSet (an adopted
// pool member keeps its own).
func selectorLabels(a *agentsv1.Agent) map[string]string {
	if adopted(a) {
		return memberSelector(StatefulSetName(a))
	}
	return agentsv1.GatewayPodSelector(a.Name)
}

// Image is the gateway image of version.
func Image(template, version string) string {
	if strings.Contains(template, "%s") {
		return fmt.Sprintf(template, version)
	}
	return template
}

// versionFromImage is the version that Image(template, v) put into image, or "".
func versionFromImage(template, image string) string {
	pre, suf, ok := strings.Cut(template, "%s")
	if !ok || !strings.HasPrefix(image, pre) || !strings.HasSuffix(image, suf) || len(image) <= len(pre)+len(suf) {
		return ""
	}
	return image[len(pre) : len(image)-len(suf)]
}

// ConfigHash digests everything that needs a new pod: the controller's config hash, the
// restart nonce, the engine version, the attached secrets (names and values), the gateway
// token and the Secrets' names. Values are only ever stored digested, all in one hash.
func ConfigHash(d runtime.Desired) string {
	h := sha256.New()
	field := func(name, value string) {
		for _, s := range []string{name, value} {
			_ = binary.Write(h, binary.BigEndian, uint64(len(s)))
			h.Write([]byte(s))
		}
	}
	field("config", d.ConfigHash())
	field("restart", d.RestartNonce)
	field("version", d.EngineVersion)
	field("envSecret", d.EnvSecret)
	keys := make([]string, 0, len(d.Env))
	for k := range d.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field("env:"+k, d.Env[k])
	}
	field("tokenSecret", d.GatewayTokenSecret)
	field("token", d.GatewayToken)
	return hex.EncodeToString(h.Sum(nil)[:16])
}
