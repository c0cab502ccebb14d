package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatewayPoolSpec is how many warm gateways to keep booted.
type GatewayPoolSpec struct {
	// Replicas is how many booted, idle gateways the pool keeps ready to be claimed by new
	// agents (0: none). `kubectl scale gatewaypool/<name> --replicas=N` sets it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	Replicas int32 `json:"replicas"`
	// EngineVersion of the pool's gateways; unset means the platform's default version. Only
	// agents of this version claim them.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	EngineVersion string `json:"engineVersion,omitempty"`
	// Workspaces whose namespaces each keep `replicas` gateways (kube runtime: a pod and its
	// volume cannot move to another namespace, so a gateway is booted where the agent that
	// claims it will live). A pool on the kube runtime that names none keeps no gateway. The
	// local runtime ignores it: its gateways serve every workspace.
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +optional
	Workspaces []string `json:"workspaces,omitempty"`
}

// GatewayPoolStatus is what the runtime observes of the pool.
type GatewayPoolStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the number of gateways the pool holds: ready plus booting (the scale
	// subresource's status), summed over its workspaces on the kube runtime.
	// +optional
	Replicas int32 `json:"replicas"`
	// Ready gateways answer their health check and are handed to the next new agents.
	// +optional
	Ready int32 `json:"ready"`
	// Booting gateways are started and not healthy yet.
	// +optional
	Booting int32 `json:"booting"`
	// Claimed counts the gateways handed to agents since the pool was created.
	// +optional
	Claimed int64 `json:"claimed"`
	// EngineVersion is the version the pool's gateways run (the resolved spec.engineVersion).
	// +optional
	EngineVersion string `json:"engineVersion,omitempty"`
	// Conditions: Ready (every replica is booted and healthy).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GatewayPool keeps engine gateways booted and idle so that a new agent starts in well under
// a second: its identity and token are bound to a warm gateway instead of booting one.
// Cluster-scoped. On the local runtime one pool serves every workspace; on the kube runtime
// it keeps its gateways in the namespaces of spec.workspaces.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas
// +kubebuilder:resource:scope=Cluster,shortName=gwpool,categories=agentplane
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Booting",type=integer,JSONPath=`.status.booting`
// +kubebuilder:printcolumn:name="Claimed",type=integer,JSONPath=`.status.claimed`
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.status.engineVersion`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GatewayPoolSpec   `json:"spec,omitempty"`
	Status GatewayPoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// GatewayPoolList is a list of GatewayPools.
type GatewayPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GatewayPool `json:"items"`
}

func init() {
	register(&GatewayPool{}, &GatewayPoolList{})
}
