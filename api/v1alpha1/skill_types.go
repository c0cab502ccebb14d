package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SkillSpec is a skill installed in a workspace: a bundle (zip with SKILL.md) kept in
// content-addressed storage.
type SkillSpec struct {
	// Slug of the skill in the registry (ClawHub).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	Slug string `json:"slug"`
	// Version of the installed bundle.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version"`
	// CID of the bundle in storage.
	// +kubebuilder:validation:Pattern=`^(Qm[1-9A-HJ-NP-Za-km-z]{44}|b[a-z2-7]{50,200})$`
	CID string `json:"cid"`
	// Registry is the base URL the bundle was downloaded from.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Registry string `json:"registry,omitempty"`
	// DisplayName from the registry.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	DisplayName string `json:"displayName,omitempty"`
}

// SkillStatus is the observed state of an installed skill.
type SkillStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Size of the bundle in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// AttachedTo lists the agents that attach this skill.
	// +listType=set
	// +optional
	AttachedTo []string `json:"attachedTo,omitempty"`
	// Conditions: Ready (the bundle is in storage).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Skill is an installed skill bundle, attached to agents by its CID.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sk,categories=agentplane
// +kubebuilder:printcolumn:name="Slug",type=string,JSONPath=`.spec.slug`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="CID",type=string,JSONPath=`.spec.cid`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Skill struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SkillSpec   `json:"spec,omitempty"`
	Status SkillStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// SkillList is a list of Skills.
type SkillList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Skill `json:"items"`
}

func init() {
	register(&Skill{}, &SkillList{})
}

// CIDs are the bundles the Skill stands for: its current CID first, then earlier versions'
// (AnnotationSkillPreviousCIDs).
func (s *Skill) CIDs() []string {
	out := []string{s.Spec.CID}
	if prev := s.Annotations[AnnotationSkillPreviousCIDs]; prev != "" {
		out = append(out, strings.Split(prev, ",")...)
	}
	return out
}
