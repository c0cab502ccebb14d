package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Network is the key space a file is stored in.
// +kubebuilder:validation:Enum=public;private
type Network string

const (
	NetworkPublic  Network = "public"
	NetworkPrivate Network = "private"
)

// FileSignature is a wallet's EIP-712 signature over the file's CID and upload date.
type FileSignature struct {
	// Address of the wallet that signed, 0x + 40 hex.
	// +kubebuilder:validation:Pattern=`^0x[0-9a-fA-F]{40}$`
	Address string `json:"address"`
	// Signature as sent, 0x + 130 hex.
	// +kubebuilder:validation:Pattern=`^0x[0-9a-fA-F]{130}$`
	Signature string `json:"signature"`
	// SignedAt is when the signature was added.
	SignedAt metav1.Time `json:"signedAt"`
}

// FileSpec is a file stored by CID. The object's name is derived from network and CID, so
// uploading the same bytes again finds the same object.
//
// +kubebuilder:validation:XValidation:rule="self.cid == oldSelf.cid && self.network == oldSelf.network",message="network and cid are immutable"
// +kubebuilder:validation:XValidation:rule="self.createdAt == oldSelf.createdAt",message="createdAt is immutable"
type FileSpec struct {
	// Network the file is stored on.
	Network Network `json:"network"`
	// CID of the file's bytes (UnixFS CIDv1).
	// +kubebuilder:validation:Pattern=`^(Qm[1-9A-HJ-NP-Za-km-z]{44}|b[a-z2-7]{50,200})$`
	CID string `json:"cid"`
	// ID is the file's public id in the REST API.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ID string `json:"id,omitempty"`
	// Name given at upload.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Name string `json:"name,omitempty"`
	// Size in bytes.
	// +kubebuilder:validation:Minimum=0
	Size int64 `json:"size"`
	// MimeType detected or given at upload.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MimeType string `json:"mimeType,omitempty"`
	// CreatedAt is the first upload time, RFC 3339 in UTC with milliseconds; it is the `date`
	// of the EIP-712 message a wallet signs.
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`
	CreatedAt string `json:"createdAt"`
	// KeyValues are user metadata.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	KeyValues map[string]string `json:"keyvalues,omitempty"`
	// Signature attached by a wallet, if any.
	// +optional
	Signature *FileSignature `json:"signature,omitempty"`
}

// FileStatus is the observed state of a stored file.
type FileStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the bytes are in storage).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// File is a file stored by CID on the public or private network of a workspace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cidf,categories=agentplane
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.network`
// +kubebuilder:printcolumn:name="CID",type=string,JSONPath=`.spec.cid`
// +kubebuilder:printcolumn:name="Name",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Signed By",type=string,JSONPath=`.spec.signature.address`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type File struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FileSpec   `json:"spec,omitempty"`
	Status FileStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FileList is a list of Files.
type FileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []File `json:"items"`
}

func init() {
	register(&File{}, &FileList{})
}
