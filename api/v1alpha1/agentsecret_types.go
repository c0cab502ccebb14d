package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EncryptedValue is a value sealed with AES-256-GCM under the platform's secrets key.
type EncryptedValue struct {
	// KeyID identifies the key the value was sealed with.
	// +kubebuilder:validation:MaxLength=64
	KeyID string `json:"keyId"`
	// Ciphertext is base64(nonce || ciphertext || tag).
	// +kubebuilder:validation:MaxLength=65536
	Ciphertext string `json:"ciphertext"`
}

// AgentSecretSpec is a workspace secret. Exactly one of encryptedValue and secretRef is set;
// plaintext is never stored in this object.
//
// +kubebuilder:validation:XValidation:rule="has(self.encryptedValue) != has(self.secretRef)",message="exactly one of encryptedValue and secretRef must be set"
type AgentSecretSpec struct {
	// Name of the secret, unique in the workspace. It is also the environment variable the
	// agent sees unless envName is set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// Provider the credential belongs to (for example `openai`); an agent may attach at most
	// one secret per provider.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9._-]*$`
	// +optional
	Provider string `json:"provider,omitempty"`
	// EnvName is the environment variable the agent sees; defaults to name upper-cased with
	// every other character replaced by `_`.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=128
	// +optional
	EnvName string `json:"envName,omitempty"`
	// EncryptedValue holds the sealed value (set by the REST facade).
	// +optional
	EncryptedValue *EncryptedValue `json:"encryptedValue,omitempty"`
	// SecretRef points at an existing core Secret instead (for platform teams).
	// +optional
	SecretRef *SecretKeyReference `json:"secretRef,omitempty"`
}

// AgentSecretStatus is the observed state of a workspace secret.
type AgentSecretStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// AttachedTo lists the agents that attach this secret.
	// +listType=set
	// +optional
	AttachedTo []string `json:"attachedTo,omitempty"`
	// Conditions: Ready, DuplicateName.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentSecret is a workspace secret that agents attach and see as environment.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=asec,categories=agentplane
// +kubebuilder:printcolumn:name="Secret Name",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Attached",type=string,JSONPath=`.status.attachedTo`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentSecret struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AgentSecretSpec   `json:"spec,omitempty"`
	Status AgentSecretStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentSecretList is a list of AgentSecrets.
type AgentSecretList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentSecret `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentSecret{}, &AgentSecretList{})
}
