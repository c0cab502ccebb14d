package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApiKeySpec describes a caller credential. The key's object name is the `jti` claim of the
// JWT that carries it; the token itself is never stored.
type ApiKeySpec struct {
	// UserID is the user the key acts for (the token's `sub`). Empty for keys that do not
	// resolve to a user; routes that need one answer `Missing userId`.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	UserID string `json:"userId,omitempty"`
	// Scopes granted to the key, for example `org:files:write` or `agents:write`.
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +optional
	Scopes []string `json:"scopes,omitempty"`
	// Role the key acts with when its user is not a member of the workspace.
	// +optional
	Role Role `json:"role,omitempty"`
	// ExpiresAt is when the key stops working. Unset means it does not expire.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Revoked keys are refused with 401.
	// +optional
	Revoked bool `json:"revoked,omitempty"`
	// Description is a free-text note.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Description string `json:"description,omitempty"`
}

// ApiKeyStatus is the observed state of an API key.
type ApiKeyStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (False once expired or revoked).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ApiKey is a caller credential of a workspace (namespace). The bearer JWT names it by `jti`.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ak,categories=agentplane
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.userId`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.spec.role`
// +kubebuilder:printcolumn:name="Revoked",type=boolean,JSONPath=`.spec.revoked`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApiKey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ApiKeySpec   `json:"spec,omitempty"`
	Status ApiKeyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ApiKeyList is a list of ApiKeys.
type ApiKeyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApiKey `json:"items"`
}

func init() {
	register(&ApiKey{}, &ApiKeyList{})
}
