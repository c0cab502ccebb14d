package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DomainPhase is where a domain is on its way to serving traffic.
// +kubebuilder:validation:Enum=pending_ownership;pending;active;failed
type DomainPhase string

const (
	// DomainPendingOwnership: waiting for the ownership TXT record to be visible.
	DomainPendingOwnership DomainPhase = "pending_ownership"
	// DomainPending: ownership proven (or not needed); routing is being set up.
	DomainPending DomainPhase = "pending"
	// DomainActive: routed to the agent.
	DomainActive DomainPhase = "active"
	// DomainFailed: cannot be served (see conditions).
	DomainFailed DomainPhase = "failed"
)

// MaxDomainsPerAgent is the contract's limit of domains on one agent.
const MaxDomainsPerAgent = 5

// DomainSpec routes a host name to an agent. Exactly one of subdomain and customDomain.
//
// +kubebuilder:validation:XValidation:rule="has(self.subdomain) != has(self.customDomain)",message="exactly one of subdomain and customDomain must be set"
// +kubebuilder:validation:XValidation:rule="self.agentRef == oldSelf.agentRef",message="agentRef is immutable"
// +kubebuilder:validation:XValidation:rule="(has(self.subdomain) == has(oldSelf.subdomain)) && (!has(self.subdomain) || self.subdomain == oldSelf.subdomain) && (has(self.customDomain) == has(oldSelf.customDomain)) && (!has(self.customDomain) || self.customDomain == oldSelf.customDomain)",message="the host name is immutable; create a new Domain instead"
type DomainSpec struct {
	// AgentRef is the agent the domain routes to.
	AgentRef LocalObjectReference `json:"agentRef"`
	// Subdomain of the platform's apps domain: a single DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Subdomain string `json:"subdomain,omitempty"`
	// CustomDomain is a host name the workspace owns, proven with a DNS TXT record.
	// +kubebuilder:validation:MinLength=4
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`
	// +optional
	CustomDomain string `json:"customDomain,omitempty"`
	// TargetPort on the agent that receives the traffic.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=18789
	// +optional
	TargetPort int32 `json:"targetPort,omitempty"`
}

// DomainVerification is the DNS record that proves ownership of a custom domain.
type DomainVerification struct {
	// RecordName is the TXT record to create, `_<brand>-verify.<domain>`.
	RecordName string `json:"recordName"`
	// Token is the value the TXT record must hold.
	Token string `json:"token"`
}

// DomainStatus is the observed state of a domain.
type DomainStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase: pending_ownership, pending, active or failed.
	// +optional
	Phase DomainPhase `json:"phase,omitempty"`
	// Host is the full host name served.
	// +optional
	Host string `json:"host,omitempty"`
	// Verification is the TXT record that proves ownership (custom domains).
	// +optional
	Verification *DomainVerification `json:"verification,omitempty"`
	// LastChecked is when the TXT record was last looked up.
	// +optional
	LastChecked *metav1.Time `json:"lastChecked,omitempty"`
	// NextCheck is when it will be looked up again.
	// +optional
	NextCheck *metav1.Time `json:"nextCheck,omitempty"`
	// VerifyRequestAnswered is the agentplane.io/verify-requested-at value the last look-up
	// answered: a requester waits for its own request (or a later one) here, to the
	// nanosecond, whatever the second of the last look-up.
	// +optional
	VerifyRequestAnswered string `json:"verifyRequestAnswered,omitempty"`
	// Checks counts the look-ups so far (drives the growing delay).
	// +optional
	Checks int32 `json:"checks,omitempty"`
	// Conditions: Verified, Routed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Domain routes a subdomain of the platform or a custom domain to an agent.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dom,categories=agentplane
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.status.host`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.agentRef.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Domain struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DomainSpec   `json:"spec,omitempty"`
	Status DomainStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// DomainList is a list of Domains.
type DomainList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Domain `json:"items"`
}

func init() {
	register(&Domain{}, &DomainList{})
}
