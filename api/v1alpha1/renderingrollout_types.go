package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentRendering says whether an agent's gateway runs the manager's rendering of it.
// +kubebuilder:validation:Enum=Current;Outdated
type AgentRendering string

const (
	// RenderingCurrent: the gateway runs this manager's rendering (or none runs: the next
	// gateway gets it).
	RenderingCurrent AgentRendering = "Current"
	// RenderingOutdated: the gateway runs an earlier manager's rendering and keeps running it
	// until a RenderingRollout's wave allows the restart (or it restarts for another reason).
	RenderingOutdated AgentRendering = "Outdated"
)

const (
	// AnnotationAllowedRendering on an Agent names the rendering (status.renderingTarget) its
	// gateway may restart onto when only the platform's rendering of it changed. A
	// RenderingRollout's wave sets it; a value other than the manager's rendering allows nothing.
	AnnotationAllowedRendering = "agentplane.io/allowed-rendering"
	// LabelRenderingRollout marks the RenderingRollouts the manager made itself.
	LabelRenderingRollout = "agentplane.io/rendering-rollout"
)

// RenderingRolloutSpec moves the agents whose gateway runs an earlier manager's rendering to
// this manager's, in waves.
type RenderingRolloutSpec struct {
	// Rendering is the platform rendering the agents move to: the manager's (the prefix of
	// every Agent's status.renderingTarget it computes).
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="rendering is immutable"
	Rendering string `json:"rendering"`
	// Workspaces limits the rollout to the agents of these workspaces (unset: every
	// workspace), for example a canary workspace first.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Workspaces []string `json:"workspaces,omitempty"`
	// WavePercent is the share of the agents to move per wave (at least one agent).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=25
	// +optional
	WavePercent int32 `json:"wavePercent,omitempty"`
	// HealthTimeout is how long a restarted gateway has to run the new rendering and be Ready
	// before the rollout halts.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="healthTimeout must be between 1s and 24h"
	// +optional
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`
	// Paused stops the rollout between waves: the wave under way finishes, no new one starts.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// RenderingRolloutStatus is the rollout's progress in the shape of an EngineUpgrade's (counts:
// upgraded are the agents it moved and were healthy, rolledBack those that were not), with
// how many agents run the rendering.
type RenderingRolloutStatus struct {
	EngineUpgradeStatus `json:",inline"`
	// Current counts the agents whose gateway runs the rendering (or runs none).
	// +optional
	Current int32 `json:"current"`
	// Total counts the agents.
	// +optional
	Total int32 `json:"total"`
}

// RenderingRollout restarts, in waves, the gateways that run an earlier manager's rendering
// of them (after a platform upgrade changed the gateway pod: a probe, a label, an init step,
// a default resource). The manager makes one when it starts leading (--rendering-rollout=waves).
// Per agent it takes a Snapshot, allows the restart (AnnotationAllowedRendering) and waits for
// the gateway to run the new rendering and be Ready; an agent that is not halts the rollout.
// The old rendering cannot be made again by the new manager, so there is no rollback: the
// failed agent stays on the new rendering (its snapshot taken), every other agent keeps its
// old pod, and the failed agents are reported. Cluster-scoped.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 53",message="the name of a RenderingRollout is at most 53 characters (it labels the Snapshots it takes)"
// +kubebuilder:resource:scope=Cluster,shortName=rro,categories=agentplane
// +kubebuilder:printcolumn:name="Rendering",type=string,JSONPath=`.spec.rendering`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.currentWave`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.current`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Failed",type=string,JSONPath=`.status.failedAgents`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RenderingRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RenderingRolloutSpec   `json:"spec,omitempty"`
	Status RenderingRolloutStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// RenderingRolloutList is a list of RenderingRollouts.
type RenderingRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RenderingRollout `json:"items"`
}

func init() {
	register(&RenderingRollout{}, &RenderingRolloutList{})
}
