package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SnapshotPhase is where a snapshot is in its life.
// +kubebuilder:validation:Enum=pending;completed;failed
type SnapshotPhase string

const (
	SnapshotPending   SnapshotPhase = "pending"
	SnapshotCompleted SnapshotPhase = "completed"
	SnapshotFailed    SnapshotPhase = "failed"
)

// SnapshotSpec asks for a content-addressed archive of an agent's home.
//
// +kubebuilder:validation:XValidation:rule="self.agentRef == oldSelf.agentRef",message="agentRef is immutable"
type SnapshotSpec struct {
	// AgentRef is the agent whose workspace is archived.
	AgentRef LocalObjectReference `json:"agentRef"`
}

// SnapshotStatus is the result of archiving.
type SnapshotStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase: pending, completed or failed.
	// +optional
	Phase SnapshotPhase `json:"phase,omitempty"`
	// CID of the archive (UnixFS CIDv1 of a deterministic tar).
	// +optional
	CID string `json:"cid,omitempty"`
	// Size of the archive in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// CompletedAt is when the archive was stored.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Snapshot is a content-addressed archive of an agent's home.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=snap,categories=agentplane
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.agentRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="CID",type=string,JSONPath=`.status.cid`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Snapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SnapshotSpec   `json:"spec,omitempty"`
	Status SnapshotStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SnapshotList is a list of Snapshots.
type SnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Snapshot `json:"items"`
}

func init() {
	register(&Snapshot{}, &SnapshotList{})
}
