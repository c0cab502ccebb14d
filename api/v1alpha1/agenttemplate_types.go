package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TemplateState is whether a template is offered to workspaces.
// +kubebuilder:validation:Enum=draft;published;archived
type TemplateState string

const (
	TemplateDraft     TemplateState = "draft"
	TemplatePublished TemplateState = "published"
	TemplateArchived  TemplateState = "archived"
)

// AgentTemplateSpec is a ready-made agent that workspaces can create agents from.
type AgentTemplateSpec struct {
	// Slug is the template's public id.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Slug string `json:"slug"`
	// DisplayName of the template; also the default name of agents made from it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1F\x7F<>{}\x60\\]+$`
	DisplayName string `json:"displayName"`
	// AgentProfile of new agents (description, vibe, emoji): it fills what an agent leaves
	// unset.
	AgentProfile `json:",inline"`
	// State: only published templates are listed and usable.
	// +kubebuilder:default=draft
	// +optional
	State TemplateState `json:"state,omitempty"`
	// SnapshotCID seeds the new agent's home when storage holds it.
	// +kubebuilder:validation:Pattern=`^(Qm[1-9A-HJ-NP-Za-km-z]{44}|b[a-z2-7]{50,200})$`
	// +optional
	SnapshotCID string `json:"snapshotCid,omitempty"`
	// EngineVersion the agent runs; unset means the platform default.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	EngineVersion string `json:"engineVersion,omitempty"`
	// RequiredSecrets are secret names the agent expects in its workspace.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	RequiredSecrets []string `json:"requiredSecrets,omitempty"`
	// Skills (bundle CIDs) attached to new agents, at most 10.
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=cid
	// +optional
	Skills []AgentSkill `json:"skills,omitempty"`
}

// AgentTemplateStatus is the observed state of a template.
type AgentTemplateStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the snapshot, when named, is in storage).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentTemplate is a ready-made agent offered to every workspace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=atpl,categories=agentplane
// +kubebuilder:printcolumn:name="Slug",type=string,JSONPath=`.spec.slug`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.spec.engineVersion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AgentTemplateSpec   `json:"spec,omitempty"`
	Status AgentTemplateStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentTemplateList is a list of AgentTemplates.
type AgentTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentTemplate `json:"items"`
}

func init() {
	register(&AgentTemplate{}, &AgentTemplateList{})
}
