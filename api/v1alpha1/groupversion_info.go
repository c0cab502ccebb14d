// Package v1alpha1 contains the agentplane.io/v1alpha1 API: agents and everything they are
// made of (secrets, skills, channels, domains, snapshots, templates), tenancy (workspaces and
// API keys) and content-addressed files.
//
// +kubebuilder:object:generate=true
// +groupName=agentplane.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "agentplane.io", Version: "v1alpha1"}

	// StorageGroupVersion is agentplane.io/v1beta1, which the CRDs serve with the very schema of
	// GroupVersion (`make manifests` derives its version entry from v1alpha1's, conversion None:
	// the API server rewrites only apiVersion) and store every kind in. The Go code keeps
	// using this package's types; the storage migration (controllers/storageversion) moves
	// objects stored as v1alpha1 to it. README "API versions" has the policy.
	StorageGroupVersion = schema.GroupVersion{Group: GroupVersion.Group, Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes are the kinds of this package, each file's registered by its init (register).
var knownTypes []runtime.Object

// register adds kinds (an object and its list) to this package's.
func register(objs ...runtime.Object) { knownTypes = append(knownTypes, objs...) }

// addKnownTypes adds the kinds of this package to s under GroupVersion, with the meta types
// every group version has (options, watch events, status).
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
