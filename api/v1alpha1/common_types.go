package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CIDPattern accepts a CIDv0 (base58btc, "Qm...") or a CIDv1 in base32 ("b..."), the forms
// agentplane stores and answers with. Full parsing happens in the REST facade and controllers.
const CIDPattern = `^(Qm[1-9A-HJ-NP-Za-km-z]{44}|b[a-z2-7]{50,200})$`

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyReference points at one key of a core Secret in the same namespace.
type SecretKeyReference struct {
	// Name of the core Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key inside the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// Reservation holds one slot of a limit (agents per workspace, domains per agent) between the
// moment a caller asks for it and the moment the object that uses it exists. Reservations are
// written with optimistic concurrency, so the API server arbitrates concurrent callers.
type Reservation struct {
	// Name of the object that holds the slot.
	Name string `json:"name"`
	// Time the slot was taken; stale reservations without an object are released.
	Time metav1.Time `json:"time"`
	// UID of the object, where the name alone could be a later object of the same name
	// (an agent's slot given back while it is being deleted).
	// +optional
	UID types.UID `json:"uid,omitempty"`
}
