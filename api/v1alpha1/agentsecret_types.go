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
// plaintext is never stored in this object. The environment name it is seen as (envName, else
// derived from name) must not be a reserved one (internal/rules/secrets.ReservedEnvNames: the rule
// below is secrets.ReservedEnvPattern, which a test checks).
//
// +kubebuilder:validation:XValidation:rule="has(self.encryptedValue) != has(self.secretRef)",message="exactly one of encryptedValue and secretRef must be set"
// +kubebuilder:validation:XValidation:rule="has(self.envName) ? !self.envName.matches('^([Aa][Ll][Ll][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Bb][Aa][Ss][Hh][Oo][Pp][Tt][Ss]$|[Bb][Aa][Ss][Hh][^A-Za-z0-9][Ee][Nn][Vv]$|[Cc][Dd][Pp][Aa][Tt][Hh]$|[Ee][Dd][Ii][Tt][Oo][Rr]$|[Ee][Nn][Vv]$|[Gg][Cc][Oo][Nn][Vv][^A-Za-z0-9][Pp][Aa][Tt][Hh]$|[Gg][Ee][Tt][Cc][Oo][Nn][Ff][^A-Za-z0-9][Dd][Ii][Rr]$|[Gg][Ii][Tt][^A-Za-z0-9][Aa][Ss][Kk][Pp][Aa][Ss][Ss]$|[Gg][Ii][Tt][^A-Za-z0-9][Ee][Dd][Ii][Tt][Oo][Rr]$|[Gg][Ii][Tt][^A-Za-z0-9][Ee][Xx][Ee][Cc][^A-Za-z0-9][Pp][Aa][Tt][Hh]$|[Gg][Ii][Tt][^A-Za-z0-9][Ee][Xx][Tt][Ee][Rr][Nn][Aa][Ll][^A-Za-z0-9][Dd][Ii][Ff][Ff]$|[Gg][Ii][Tt][^A-Za-z0-9][Pp][Aa][Gg][Ee][Rr]$|[Gg][Ii][Tt][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy][^A-Za-z0-9][Cc][Oo][Mm][Mm][Aa][Nn][Dd]$|[Gg][Ii][Tt][^A-Za-z0-9][Ss][Ss][Hh]$|[Gg][Ii][Tt][^A-Za-z0-9][Ss][Ss][Hh][^A-Za-z0-9][Cc][Oo][Mm][Mm][Aa][Nn][Dd]$|[Gg][Ii][Tt][^A-Za-z0-9][Tt][Ee][Mm][Pp][Ll][Aa][Tt][Ee][^A-Za-z0-9][Dd][Ii][Rr]$|[Gg][Ll][Ii][Bb][Cc][^A-Za-z0-9][Tt][Uu][Nn][Aa][Bb][Ll][Ee][Ss]$|[Gg][Ll][Oo][Bb][Ii][Gg][Nn][Oo][Rr][Ee]$|[Hh][Oo][Mm][Ee]$|[Hh][Oo][Ss][Tt][Aa][Ll][Ii][Aa][Ss][Ee][Ss]$|[Hh][Tt][Tt][Pp][Ss][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Hh][Tt][Tt][Pp][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Ii][Cc][Uu][^A-Za-z0-9][Dd][Aa][Tt][Aa]$|[Ii][Ff][Ss]$|[Ii][Nn][Pp][Uu][Tt][Rr][Cc]$|[Jj][Aa][Vv][Aa][^A-Za-z0-9][Tt][Oo][Oo][Ll][^A-Za-z0-9][Oo][Pp][Tt][Ii][Oo][Nn][Ss]$|[Ll][Aa][Nn][Gg]$|[Ll][Ee][Ss][Ss][Cc][Ll][Oo][Ss][Ee]$|[Ll][Ee][Ss][Ss][Oo][Pp][Ee][Nn]$|[Ll][Oo][Cc][Aa][Ll][Dd][Oo][Mm][Aa][Ii][Nn]$|[Ll][Oo][Cc][Pp][Aa][Tt][Hh]$|[Nn][Ii][Ss][^A-Za-z0-9][Pp][Aa][Tt][Hh]$|[Nn][Ll][Ss][Pp][Aa][Tt][Hh]$|[Nn][Oo][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Oo][Ll][Dd][Pp][Ww][Dd]$|[Pp][Aa][Gg][Ee][Rr]$|[Pp][Aa][Tt][Hh]$|[Pp][Ee][Rr][Ll]5[Ll][Ii][Bb]$|[Pp][Ee][Rr][Ll]5[Oo][Pp][Tt]$|[Pp][Ee][Rr][Ll][Ll][Ii][Bb]$|[Pp][Rr][Oo][Mm][Pp][Tt][^A-Za-z0-9][Cc][Oo][Mm][Mm][Aa][Nn][Dd]$|[Pp][Ss]4$|[Pp][Ww][Dd]$|[Rr][Ee][Ss][Oo][Ll][Vv][^A-Za-z0-9][Hh][Oo][Ss][Tt][^A-Za-z0-9][Cc][Oo][Nn][Ff]$|[Rr][Ee][Ss][^A-Za-z0-9][Oo][Pp][Tt][Ii][Oo][Nn][Ss]$|[Rr][Uu][Bb][Yy][Ll][Ii][Bb]$|[Rr][Uu][Bb][Yy][Oo][Pp][Tt]$|[Ss][Hh][Ee][Ll][Ll]$|[Ss][Hh][Ee][Ll][Ll][Oo][Pp][Tt][Ss]$|[Ss][Ss][Hh][^A-Za-z0-9][Aa][Ss][Kk][Pp][Aa][Ss][Ss]$|[Ss][Ss][Ll][^A-Za-z0-9][Cc][Ee][Rr][Tt][^A-Za-z0-9][Dd][Ii][Rr]$|[Ss][Ss][Ll][^A-Za-z0-9][Cc][Ee][Rr][Tt][^A-Za-z0-9][Ff][Ii][Ll][Ee]$|[Tt][Ee][Rr][Mm][Ii][Nn][Ff][Oo]$|[Tt][Ee][Rr][Mm][Ii][Nn][Ff][Oo][^A-Za-z0-9][Dd][Ii][Rr][Ss]$|[Tt][Mm][Pp][Dd][Ii][Rr]$|[Tt][Zz][Dd][Ii][Rr]$|[Vv][Ii][Ss][Uu][Aa][Ll]$|[Zz][Dd][Oo][Tt][Dd][Ii][Rr]$|[^A-Za-z][Jj][Aa][Vv][Aa][^A-Za-z0-9][Oo][Pp][Tt][Ii][Oo][Nn][Ss]$|[Aa][Gg][Ee][Nn][Tt][Pp][Ll][Aa][Nn][Ee][^A-Za-z0-9]|[Bb][Aa][Ss][Hh][^A-Za-z0-9][Ff][Uu][Nn][Cc][^A-Za-z0-9]|[Cc][Ll][Aa][Ww][Hh][Uu][Bb][^A-Za-z0-9]|[Cc][Oo][Rr][Ee][Pp][Aa][Cc][Kk][^A-Za-z0-9]|[Dd][Yy][Ll][Dd][^A-Za-z0-9]|[Gg][Ii][Tt][^A-Za-z0-9][Cc][Oo][Nn][Ff][Ii][Gg]|[Kk][Uu][Bb][Ee][Rr][Nn][Ee][Tt][Ee][Ss][^A-Za-z0-9]|[Ll][Dd][^A-Za-z0-9]|[Mm][Aa][Ll][Ll][Oo][Cc][^A-Za-z0-9]|[Nn][Oo][Dd][Ee][^A-Za-z0-9]|[Nn][Pp][Mm][^A-Za-z0-9][Cc][Oo][Nn][Ff][Ii][Gg][^A-Za-z0-9]|[Oo][Pp][Ee][Nn][Cc][Ll][Aa][Ww][^A-Za-z0-9]|[Oo][Pp][Ee][Nn][Ss][Ss][Ll][^A-Za-z0-9]|[Pp][Ii][Pp][^A-Za-z0-9]|[Pp][Yy][Tt][Hh][Oo][Nn]|[Uu][Vv][^A-Za-z0-9]|[Xx][Dd][Gg][^A-Za-z0-9]|[Yy][Aa][Rr][Nn][^A-Za-z0-9])') : !self.name.matches('^([Aa][Ll][Ll][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Bb][Aa][Ss][Hh][Oo][Pp][Tt][Ss]$|[Bb][Aa][Ss][Hh][^A-Za-z0-9][Ee][Nn][Vv]$|[Cc][Dd][Pp][Aa][Tt][Hh]$|[Ee][Dd][Ii][Tt][Oo][Rr]$|[Ee][Nn][Vv]$|[Gg][Cc][Oo][Nn][Vv][^A-Za-z0-9][Pp][Aa][Tt][Hh]$|[Gg][Ee][Tt][Cc][Oo][Nn][Ff][^A-Za-z0-9][Dd][Ii][Rr]$|[Gg][Ii][Tt][^A-Za-z0-9][Aa][Ss][Kk][Pp][Aa][Ss][Ss]$|[Gg][Ii][Tt][^A-Za-z0-9][Ee][Dd][Ii][Tt][Oo][Rr]$|[Gg][Ii][Tt][^A-Za-z0-9][Ee][Xx][Ee][Cc][^A-Za-z0-9][Pp][Aa][Tt][Hh]$|[Gg][Ii][Tt][^A-Za-z0-9][Ee][Xx][Tt][Ee][Rr][Nn][Aa][Ll][^A-Za-z0-9][Dd][Ii][Ff][Ff]$|[Gg][Ii][Tt][^A-Za-z0-9][Pp][Aa][Gg][Ee][Rr]$|[Gg][Ii][Tt][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy][^A-Za-z0-9][Cc][Oo][Mm][Mm][Aa][Nn][Dd]$|[Gg][Ii][Tt][^A-Za-z0-9][Ss][Ss][Hh]$|[Gg][Ii][Tt][^A-Za-z0-9][Ss][Ss][Hh][^A-Za-z0-9][Cc][Oo][Mm][Mm][Aa][Nn][Dd]$|[Gg][Ii][Tt][^A-Za-z0-9][Tt][Ee][Mm][Pp][Ll][Aa][Tt][Ee][^A-Za-z0-9][Dd][Ii][Rr]$|[Gg][Ll][Ii][Bb][Cc][^A-Za-z0-9][Tt][Uu][Nn][Aa][Bb][Ll][Ee][Ss]$|[Gg][Ll][Oo][Bb][Ii][Gg][Nn][Oo][Rr][Ee]$|[Hh][Oo][Mm][Ee]$|[Hh][Oo][Ss][Tt][Aa][Ll][Ii][Aa][Ss][Ee][Ss]$|[Hh][Tt][Tt][Pp][Ss][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Hh][Tt][Tt][Pp][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Ii][Cc][Uu][^A-Za-z0-9][Dd][Aa][Tt][Aa]$|[Ii][Ff][Ss]$|[Ii][Nn][Pp][Uu][Tt][Rr][Cc]$|[Jj][Aa][Vv][Aa][^A-Za-z0-9][Tt][Oo][Oo][Ll][^A-Za-z0-9][Oo][Pp][Tt][Ii][Oo][Nn][Ss]$|[Ll][Aa][Nn][Gg]$|[Ll][Ee][Ss][Ss][Cc][Ll][Oo][Ss][Ee]$|[Ll][Ee][Ss][Ss][Oo][Pp][Ee][Nn]$|[Ll][Oo][Cc][Aa][Ll][Dd][Oo][Mm][Aa][Ii][Nn]$|[Ll][Oo][Cc][Pp][Aa][Tt][Hh]$|[Nn][Ii][Ss][^A-Za-z0-9][Pp][Aa][Tt][Hh]$|[Nn][Ll][Ss][Pp][Aa][Tt][Hh]$|[Nn][Oo][^A-Za-z0-9][Pp][Rr][Oo][Xx][Yy]$|[Oo][Ll][Dd][Pp][Ww][Dd]$|[Pp][Aa][Gg][Ee][Rr]$|[Pp][Aa][Tt][Hh]$|[Pp][Ee][Rr][Ll]5[Ll][Ii][Bb]$|[Pp][Ee][Rr][Ll]5[Oo][Pp][Tt]$|[Pp][Ee][Rr][Ll][Ll][Ii][Bb]$|[Pp][Rr][Oo][Mm][Pp][Tt][^A-Za-z0-9][Cc][Oo][Mm][Mm][Aa][Nn][Dd]$|[Pp][Ss]4$|[Pp][Ww][Dd]$|[Rr][Ee][Ss][Oo][Ll][Vv][^A-Za-z0-9][Hh][Oo][Ss][Tt][^A-Za-z0-9][Cc][Oo][Nn][Ff]$|[Rr][Ee][Ss][^A-Za-z0-9][Oo][Pp][Tt][Ii][Oo][Nn][Ss]$|[Rr][Uu][Bb][Yy][Ll][Ii][Bb]$|[Rr][Uu][Bb][Yy][Oo][Pp][Tt]$|[Ss][Hh][Ee][Ll][Ll]$|[Ss][Hh][Ee][Ll][Ll][Oo][Pp][Tt][Ss]$|[Ss][Ss][Hh][^A-Za-z0-9][Aa][Ss][Kk][Pp][Aa][Ss][Ss]$|[Ss][Ss][Ll][^A-Za-z0-9][Cc][Ee][Rr][Tt][^A-Za-z0-9][Dd][Ii][Rr]$|[Ss][Ss][Ll][^A-Za-z0-9][Cc][Ee][Rr][Tt][^A-Za-z0-9][Ff][Ii][Ll][Ee]$|[Tt][Ee][Rr][Mm][Ii][Nn][Ff][Oo]$|[Tt][Ee][Rr][Mm][Ii][Nn][Ff][Oo][^A-Za-z0-9][Dd][Ii][Rr][Ss]$|[Tt][Mm][Pp][Dd][Ii][Rr]$|[Tt][Zz][Dd][Ii][Rr]$|[Vv][Ii][Ss][Uu][Aa][Ll]$|[Zz][Dd][Oo][Tt][Dd][Ii][Rr]$|[^A-Za-z][Jj][Aa][Vv][Aa][^A-Za-z0-9][Oo][Pp][Tt][Ii][Oo][Nn][Ss]$|[Aa][Gg][Ee][Nn][Tt][Pp][Ll][Aa][Nn][Ee][^A-Za-z0-9]|[Bb][Aa][Ss][Hh][^A-Za-z0-9][Ff][Uu][Nn][Cc][^A-Za-z0-9]|[Cc][Ll][Aa][Ww][Hh][Uu][Bb][^A-Za-z0-9]|[Cc][Oo][Rr][Ee][Pp][Aa][Cc][Kk][^A-Za-z0-9]|[Dd][Yy][Ll][Dd][^A-Za-z0-9]|[Gg][Ii][Tt][^A-Za-z0-9][Cc][Oo][Nn][Ff][Ii][Gg]|[Kk][Uu][Bb][Ee][Rr][Nn][Ee][Tt][Ee][Ss][^A-Za-z0-9]|[Ll][Dd][^A-Za-z0-9]|[Mm][Aa][Ll][Ll][Oo][Cc][^A-Za-z0-9]|[Nn][Oo][Dd][Ee][^A-Za-z0-9]|[Nn][Pp][Mm][^A-Za-z0-9][Cc][Oo][Nn][Ff][Ii][Gg][^A-Za-z0-9]|[Oo][Pp][Ee][Nn][Cc][Ll][Aa][Ww][^A-Za-z0-9]|[Oo][Pp][Ee][Nn][Ss][Ss][Ll][^A-Za-z0-9]|[Pp][Ii][Pp][^A-Za-z0-9]|[Pp][Yy][Tt][Hh][Oo][Nn]|[Uu][Vv][^A-Za-z0-9]|[Xx][Dd][Gg][^A-Za-z0-9]|[Yy][Aa][Rr][Nn][^A-Za-z0-9])')",message="envName (or the one derived from name) is reserved: it changes how the agent's processes load code or find files, or the platform sets it (PATH, HOME, TMPDIR, LD_*, NODE_*, NPM_CONFIG_*, OPENSSL_*, PYTHON*, OPENCLAW_*, AGENTPLANE_*, ...)"
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
	// EnvName is the environment variable the agent sees; defaults to name with ASCII letters
	// upper-cased and every other character but digits replaced by `_`. Names that change how
	// processes load code or find files, or that the platform sets (PATH, HOME, LD_*, NODE_*,
	// OPENCLAW_*, AGENTPLANE_*, ...), are refused.
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
	register(&AgentSecret{}, &AgentSecretList{})
}
