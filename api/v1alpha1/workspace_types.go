package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Plan is a workspace's subscription plan.
// +kubebuilder:validation:Enum=free;pro
type Plan string

const (
	// PlanFree has no channels and no custom domains.
	PlanFree Plan = "free"
	// PlanPro unlocks channels and custom domains.
	PlanPro Plan = "pro"
)

// Role is what a member may do in a workspace.
// +kubebuilder:validation:Enum=owner;admin;member;viewer
type Role string

const (
	// RoleOwner may do everything, including managing members.
	RoleOwner Role = "owner"
	// RoleAdmin may do everything but managing owners.
	RoleAdmin Role = "admin"
	// RoleMember may manage agents and their parts.
	RoleMember Role = "member"
	// RoleViewer may only read.
	RoleViewer Role = "viewer"
)

// Default agent limits per plan, used when spec.agentLimit is not set.
const (
	DefaultFreeAgentLimit = 3
	DefaultProAgentLimit  = 25
)

// WorkspaceMember is a user with a role in the workspace.
type WorkspaceMember struct {
	// UserID is the user's id, the `sub` claim of their tokens.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	UserID string `json:"userId"`
	// Role of the user in this workspace.
	// +kubebuilder:default=member
	Role Role `json:"role,omitempty"`
}

// WorkspaceSpec is the desired state of a tenant.
type WorkspaceSpec struct {
	// DisplayName is a human readable name.
	// +kubebuilder:validation:MaxLength=100
	// +optional
	DisplayName string `json:"displayName,omitempty"`
	// Plan decides paid features: channels and custom domains need `pro`.
	// +kubebuilder:default=free
	Plan Plan `json:"plan,omitempty"`
	// AgentLimit is the most agents the workspace may hold. Unset means the plan's default
	// (free: 3, pro: 25).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	AgentLimit *int32 `json:"agentLimit,omitempty"`
	// Members and their roles.
	// +listType=map
	// +listMapKey=userId
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Members []WorkspaceMember `json:"members,omitempty"`
	// Internal marks accounts of the platform operator (closed-beta routes such as Issues).
	// +optional
	Internal bool `json:"internal,omitempty"`
	// IdleAfter is the default idle policy of the workspace's agents: an agent that has seen
	// no request for this long is suspended (an Agent's own spec.idleAfter wins; unset or zero:
	// agents never idle).
	// +optional
	IdleAfter *metav1.Duration `json:"idleAfter,omitempty"`
	// Budget limits the model requests of all the workspace's agents together, through the
	// platform's model proxy (an Agent's own spec.budget applies as well).
	// +optional
	Budget *ModelBudget `json:"budget,omitempty"`
	// RuntimeClassName is the default RuntimeClass of the workspace's agents' gateway pods
	// (kube runtime): an Agent's own spec.runtimeClassName wins, this wins over the platform's
	// default (--agent-runtime-class). A DNS-1123 subdomain.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// Quotas bound what the workspace stores: files, snapshots and uploads, in bytes and in
	// objects. Unset kinds take the plan's defaults.
	// +optional
	Quotas *StorageQuotas `json:"quotas,omitempty"`
}

// WorkspaceStatus is the observed state of a tenant.
type WorkspaceStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is `Active` once the namespace exists, `Terminating` while it is deleted.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Namespace that holds the workspace's objects (same name as the workspace).
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Agents counts the agents that currently exist in the workspace.
	// +optional
	Agents int32 `json:"agents"`
	// AgentLimit is the limit in force (spec.agentLimit or the plan's default).
	// +optional
	AgentLimit int32 `json:"agentLimit,omitempty"`
	// AgentSlots counts the slots of the agent limit in use. Its size depends on the creates
	// and deletes in flight, never on how many agents the workspace holds.
	// +optional
	AgentSlots AgentSlots `json:"agentSlots,omitempty"`
	// Usage is today's model usage of all the workspace's agents through the platform's model
	// proxy. Written by the proxy's usage recorder only, at a bounded rate.
	// +optional
	Usage *ModelUsage `json:"usage,omitempty"`
	// Storage is what the workspace holds of its storage quotas (spec.quotas). Written only by
	// the quota Limiter, with optimistic concurrency.
	// +optional
	Storage StorageUsage `json:"storage,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentSlots is the agent limit's count: Used + len(Pending) slots are taken. Written only with
// optimistic concurrency (internal/rules/quota), so concurrent callers on any number of replicas
// never take more slots than the limit.
type AgentSlots struct {
	// Used counts the agents bound to a slot (their status.holdsSlot) that are not Releasing.
	// +optional
	Used int32 `json:"used"`
	// Pending are slots taken for agents not bound yet: a create in flight. The workspace
	// controller moves them into Used once their agent is bound, and frees those whose agent
	// never appeared once they are stale.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10000
	// +optional
	Pending []Reservation `json:"pending,omitempty"`
	// Releasing are the slots given back by agents that are still being deleted (name and
	// UID): already out of Used, dropped once that agent is gone.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10000
	// +optional
	Releasing []Reservation `json:"releasing,omitempty"`
}

// Taken is how many slots are in use.
func (s *AgentSlots) Taken() int { return int(s.Used) + len(s.Pending) }

// Workspace is a tenant of agentplane. Its objects live in the namespace of the same name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ws,categories=agentplane
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.spec.plan`
// +kubebuilder:printcolumn:name="Agents",type=integer,JSONPath=`.status.agents`
// +kubebuilder:printcolumn:name="Limit",type=integer,JSONPath=`.status.agentLimit`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="workspace name must be at most 63 characters (it names a namespace)"
type Workspace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkspaceSpec   `json:"spec,omitempty"`
	Status WorkspaceStatus `json:"status,omitempty"`
}

// EffectiveAgentLimit is spec.agentLimit, or the plan's default when unset.
func (w *Workspace) EffectiveAgentLimit() int {
	if w.Spec.AgentLimit != nil {
		return int(*w.Spec.AgentLimit)
	}
	if w.Spec.Plan == PlanPro {
		return DefaultProAgentLimit
	}
	return DefaultFreeAgentLimit
}

// RoleOf returns the role of userID in the workspace, or "" when not a member.
func (w *Workspace) RoleOf(userID string) Role {
	for _, m := range w.Spec.Members {
		if m.UserID == userID {
			if m.Role == "" {
				return RoleMember
			}
			return m.Role
		}
	}
	return ""
}

// +kubebuilder:object:root=true

// WorkspaceList is a list of Workspaces.
type WorkspaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workspace `json:"items"`
}

func init() {
	register(&Workspace{}, &WorkspaceList{})
}
