package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EngineUpgradePhase is where a rollout is.
// +kubebuilder:validation:Enum=Progressing;Paused;Succeeded;Halted
type EngineUpgradePhase string

const (
	// UpgradeProgressing: a wave is upgrading, or the next one is about to start.
	UpgradeProgressing EngineUpgradePhase = "Progressing"
	// UpgradePaused: spec.paused holds the rollout between waves.
	UpgradePaused EngineUpgradePhase = "Paused"
	// UpgradeSucceeded: every selected agent runs the target version.
	UpgradeSucceeded EngineUpgradePhase = "Succeeded"
	// UpgradeHalted: an agent did not become healthy on the target and was rolled back; no
	// further wave starts until the spec changes.
	UpgradeHalted EngineUpgradePhase = "Halted"
)

// WaveState is where a wave is.
// +kubebuilder:validation:Enum=Upgrading;Succeeded;Failed
type WaveState string

const (
	WaveUpgrading WaveState = "Upgrading"
	WaveSucceeded WaveState = "Succeeded"
	WaveFailed    WaveState = "Failed"
)

// EngineUpgradeSpec is an engine upgrade of many agents, rolled out in waves.
type EngineUpgradeSpec struct {
	// Version is the engine version the agents move to; it must be one the platform offers.
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z.-]+)?$`
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version"`
	// Workspaces limits the rollout to the agents of these workspaces (unset: every workspace).
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	// +optional
	Workspaces []string `json:"workspaces,omitempty"`
	// AgentSelector limits the rollout to the agents whose labels match.
	// +optional
	AgentSelector *metav1.LabelSelector `json:"agentSelector,omitempty"`
	// FromVersions limits the rollout to agents whose current version (spec.engine.version,
	// or the platform default when unset) is one of these (unset: any other version).
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	FromVersions []string `json:"fromVersions,omitempty"`
	// WavePercent is the share of the selected agents upgraded per wave (at least one agent).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=25
	// +optional
	WavePercent int32 `json:"wavePercent,omitempty"`
	// HealthTimeout is how long an upgraded gateway has to run the target version and be Ready
	// before the agent is rolled back and the rollout halts.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="healthTimeout must be between 1s and 24h"
	// +optional
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`
	// Paused stops the rollout between waves: the wave under way finishes, no new one starts.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// UpgradeWave is one wave of a rollout.
type UpgradeWave struct {
	// Index of the wave, from 1.
	Index int32 `json:"index"`
	// Agents of the wave, as `<workspace>/<agent>`.
	// +listType=atomic
	Agents []string `json:"agents"`
	// State: Upgrading, Succeeded or Failed.
	State WaveState `json:"state"`
	// StartedAt is when the wave started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// UpgradeCounts counts the rollout's agents by state.
type UpgradeCounts struct {
	// Pending agents are selected and not upgraded yet.
	// +optional
	Pending int32 `json:"pending"`
	// Upgrading agents are in the current wave: snapshot, new version, health check.
	// +optional
	Upgrading int32 `json:"upgrading"`
	// Upgraded agents run the target version and were healthy on it.
	// +optional
	Upgraded int32 `json:"upgraded"`
	// RolledBack agents were put back on their previous version and snapshot.
	// +optional
	RolledBack int32 `json:"rolledBack"`
}

// EngineUpgradeStatus is the rollout's progress, written by the EngineUpgrade controller only.
type EngineUpgradeStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase: Progressing, Paused, Succeeded or Halted.
	// +optional
	Phase EngineUpgradePhase `json:"phase,omitempty"`
	// CurrentWave is the index of the latest wave (0: none started).
	// +optional
	CurrentWave int32 `json:"currentWave,omitempty"`
	// Waves started so far, in order.
	// +listType=map
	// +listMapKey=index
	// +optional
	Waves []UpgradeWave `json:"waves,omitempty"`
	// Counts of the selected agents by state.
	// +optional
	Counts UpgradeCounts `json:"counts"`
	// FailedAgents are the agents that halted the rollout (`<workspace>/<agent>`).
	// +listType=atomic
	// +optional
	FailedAgents []string `json:"failedAgents,omitempty"`
	// HaltedGeneration is the generation the rollout halted at; a later spec resumes it.
	// +optional
	HaltedGeneration int64 `json:"haltedGeneration,omitempty"`
	// Conditions: Ready (the rollout succeeded; the reason says why not otherwise).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EngineUpgrade moves many agents to one engine version in waves. Per agent it takes a
// Snapshot, sets spec.engine.version and waits for the gateway to be healthy on the target;
// an agent that is not is rolled back (previous version, workspace restored from the
// snapshot) and the rollout halts. Cluster-scoped: one policy may span workspaces.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="the name of an EngineUpgrade is at most 63 characters (it labels the Snapshots it takes)"
// +kubebuilder:resource:scope=Cluster,shortName=engup,categories=agentplane
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.currentWave`
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.counts.pending`
// +kubebuilder:printcolumn:name="Upgraded",type=integer,JSONPath=`.status.counts.upgraded`
// +kubebuilder:printcolumn:name="RolledBack",type=integer,JSONPath=`.status.counts.rolledBack`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EngineUpgrade struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EngineUpgradeSpec   `json:"spec,omitempty"`
	Status EngineUpgradeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EngineUpgradeList is a list of EngineUpgrades.
type EngineUpgradeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EngineUpgrade `json:"items"`
}

func init() {
	register(&EngineUpgrade{}, &EngineUpgradeList{})
}
