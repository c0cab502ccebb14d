package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentPhase is the coarse state of an agent, in the hosted service's words.
// +kubebuilder:validation:Enum=starting;running;not_running;suspended
type AgentPhase string

const (
	// AgentStarting: provisioning or the gateway is booting.
	AgentStarting AgentPhase = "starting"
	// AgentRunning: the gateway answers its health check.
	AgentRunning AgentPhase = "running"
	// AgentNotRunning: stopped, crashed or failed to provision; see the conditions.
	AgentNotRunning AgentPhase = "not_running"
	// AgentSuspended: asleep (spec.suspended or the idle policy): no gateway runs, home and
	// workspace are kept, and a request or a due task wakes it.
	AgentSuspended AgentPhase = "suspended"
)

// EngineName names an agent engine.
// +kubebuilder:validation:Enum=openclaw
type EngineName string

// EngineOpenClaw is the OpenClaw gateway (npm package `openclaw`).
const EngineOpenClaw EngineName = "openclaw"

// EngineSpec chooses the engine that runs the agent.
type EngineSpec struct {
	// Name of the engine.
	// +kubebuilder:default=openclaw
	Name EngineName `json:"name,omitempty"`
	// Version of the engine, for example `2026.9.6`. Unset means the platform's default.
	// Must be one of the versions the platform offers.
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z.-]+)?$`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Version string `json:"version,omitempty"`
}

// AgentSkill attaches an installed Skill, by the CID of its bundle.
type AgentSkill struct {
	// CID of the skill bundle (see Skill.spec.cid).
	// +kubebuilder:validation:Pattern=`^(Qm[1-9A-HJ-NP-Za-km-z]{44}|b[a-z2-7]{50,200})$`
	CID string `json:"cid"`
}

// AgentProfile are the agent's display fields a user or a template sets freely: one
// declaration for the Agent's spec, the AgentTemplate's spec, the REST API's create request
// and views (all embed it, so a field's JSON name is the same in the CRDs and the REST API),
// the template expansion (admission.ApplyTemplate fills every unset field from the template)
// and the engine (engine.Identity embeds it). A field added here is REST-visible,
// template-settable and engine-visible with no other edit; docs/ARCHITECTURE.md has the
// checklist. Fields are optional: the zero value means unset.
type AgentProfile struct {
	// Description of what the agent is for.
	// +kubebuilder:validation:MaxLength=1000
	// +optional
	Description string `json:"description,omitempty"`
	// Vibe is a short personality line written into the agent's identity.
	// +kubebuilder:validation:MaxLength=200
	// +optional
	Vibe string `json:"vibe,omitempty"`
	// Emoji shown next to the agent.
	// +kubebuilder:validation:MaxLength=16
	// +optional
	Emoji string `json:"emoji,omitempty"`
}

// AgentSpec is the desired state of an agent.
type AgentSpec struct {
	// DisplayName is the agent's name (the REST field `name`): 1 to 100 characters, not blank,
	// without control characters or any of < > { } ` \ (they break prompts and markup).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[^\x00-\x1F\x7F<>{}\x60\\]+$`
	// +kubebuilder:validation:XValidation:rule="self.trim().size() > 0",message="name must not be blank"
	DisplayName string `json:"displayName"`
	// AgentProfile: the description, vibe and emoji.
	AgentProfile `json:",inline"`
	// Engine that runs the agent.
	// +kubebuilder:default={name: openclaw}
	// +optional
	Engine EngineSpec `json:"engine,omitempty"`
	// Template is the AgentTemplate (by name) the agent was created from.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Template string `json:"template,omitempty"`
	// Skills attached to the agent, at most 10.
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=cid
	// +optional
	Skills []AgentSkill `json:"skills,omitempty"`
	// Secrets are AgentSecrets (by object name) exposed to the agent as environment.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Secrets []LocalObjectReference `json:"secrets,omitempty"`
	// DesiredSnapshot is the CID of a snapshot of this agent to restore the workspace from.
	// +kubebuilder:validation:Pattern=`^(Qm[1-9A-HJ-NP-Za-km-z]{44}|b[a-z2-7]{50,200})$`
	// +optional
	DesiredSnapshot string `json:"desiredSnapshot,omitempty"`
	// RestoreRequestedAt restores spec.desiredSnapshot again when set to a time later than
	// status.lastRestoreAt (a workspace already restored from that CID may have changed since).
	// Setting desiredSnapshot to another CID restores without it.
	// +optional
	RestoreRequestedAt *metav1.Time `json:"restoreRequestedAt,omitempty"`
	// Stopped keeps the agent's state but runs no gateway.
	// +optional
	Stopped bool `json:"stopped,omitempty"`
	// RestartRequestedAt restarts the gateway when set to a time later than the last restart.
	// +optional
	RestartRequestedAt *metav1.Time `json:"restartRequestedAt,omitempty"`
	// Suspended lets the agent sleep: its gateway is drained and stopped, its home and
	// workspace are kept, and it holds no process or pod. Unlike stopped, a suspended agent
	// wakes by itself for a while: ahead of its next scheduled task and when a request needs
	// its gateway (spec.wakeRequestedAt). Setting it back to false resumes the agent.
	// +optional
	Suspended bool `json:"suspended,omitempty"`
	// IdleAfter suspends the agent once it has seen no request for this long (unset: the
	// workspace's spec.idleAfter; zero on both: never idles). An idle-suspended agent wakes
	// like a suspended one.
	// +optional
	IdleAfter *metav1.Duration `json:"idleAfter,omitempty"`
	// WakeRequestedAt wakes a suspended or idle agent when set to a time later than its last
	// wake (the REST facade sets it for a request that needs the gateway). The agent stays
	// awake for its idle window (spec.idleAfter, or the platform's default wake window).
	// +optional
	WakeRequestedAt *metav1.Time `json:"wakeRequestedAt,omitempty"`
	// ConfigRef is the user's engine config (a JSON or JSON5 object): a key of a core Secret
	// in the agent's namespace (`PUT /config` stores it in `<agent>-config`, key `config`).
	// The Agent controller renders the engine's file from it, the agent's Channels and what
	// the engine and the runtime own (OpenClaw's `meta`, `gateway.auth`). Unset: the file in
	// the agent's home, as the runtime seeded it, is the base.
	// +optional
	ConfigRef *SecretKeyReference `json:"configRef,omitempty"`
	// Resources sizes the gateway container (kube runtime) or the agent's cgroup (local
	// runtime as root: the memory limit, the cpu limit as a quota, the cpu request as a weight
	// against the other agents). Unset values take the platform's defaults; a request above
	// the limit raises the limit to it. The gateway's Node heap follows the memory limit.
	// +optional
	Resources *AgentResources `json:"resources,omitempty"`
	// Budget limits the agent's model requests through the platform's model proxy (the
	// workspace's spec.budget applies to all its agents together as well).
	// +optional
	Budget *ModelBudget `json:"budget,omitempty"`
	// RuntimeClassName is the RuntimeClass of the agent's gateway pod (kube runtime; the local
	// runtime runs processes and ignores it), for example a sandbox such as gVisor or Kata. It
	// wins over the workspace's spec.runtimeClassName and the platform's default
	// (--agent-runtime-class). A change rolls the gateway pod. A DNS-1123 subdomain.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
}

// AgentResources are the cpu and memory requests and limits of an agent's gateway.
type AgentResources struct {
	// Requests of cpu and memory the scheduler reserves on a node.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory')",message="only cpu and memory can be set"
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits of cpu and memory.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory')",message="only cpu and memory can be set"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// RenderedChannel is a Channel written into the engine config file.
type RenderedChannel struct {
	// Type of the channel.
	Type ChannelType `json:"type"`
	// Name of the Channel object.
	Name string `json:"name"`
	// Generation of the Channel that was rendered.
	Generation int64 `json:"generation"`
	// Removal (in pendingChannels only): the render meant to take this Channel, which is
	// being deleted, out of the file.
	// +optional
	Removal bool `json:"removal,omitempty"`
}

// AgentConfigStatus is what the engine config file in the agent's home was rendered from.
type AgentConfigStatus struct {
	// SourceHash identifies the user's config (spec.configRef's value) of the last render,
	// successful or not (`sha256:<hex>`); empty when the agent has none.
	// +optional
	SourceHash string `json:"sourceHash,omitempty"`
	// InputsHash identifies everything the file was last rendered from (the user's config
	// and the channels); a pass with the same inputs does not read or write the file.
	// +optional
	InputsHash string `json:"inputsHash,omitempty"`
	// Channels are the channels the file holds, by type.
	// +listType=map
	// +listMapKey=type
	// +optional
	Channels []RenderedChannel `json:"channels,omitempty"`
	// PendingChannels are the channels the last render meant to write, or to remove, when it
	// failed (the ConfigApplied condition says why); empty after a render that succeeded.
	// +listType=map
	// +listMapKey=type
	// +optional
	PendingChannels []RenderedChannel `json:"pendingChannels,omitempty"`
	// ModelProviders are the model providers the file points at the platform's model proxy
	// (their keys stay in the proxy; the agent holds a proxy credential).
	// +listType=set
	// +optional
	ModelProviders []string `json:"modelProviders,omitempty"`
}

// AgentSleep is what the Agent controller knows of an agent's sleep.
type AgentSleep struct {
	// SuspendedAt is when the gateway was last put to sleep.
	// +optional
	SuspendedAt *metav1.Time `json:"suspendedAt,omitempty"`
	// NextTaskAt is the next run of the agent's scheduled tasks as the engine listed them
	// before it was suspended; the agent is woken ahead of it.
	// +optional
	NextTaskAt *metav1.Time `json:"nextTaskAt,omitempty"`
	// NextWakeAt is when the controller wakes the agent next (NextTaskAt minus the lead).
	// +optional
	NextWakeAt *metav1.Time `json:"nextWakeAt,omitempty"`
	// WokenAt is the last wake for a scheduled task (a request's wake is
	// spec.wakeRequestedAt).
	// +optional
	WokenAt *metav1.Time `json:"wokenAt,omitempty"`
	// WakeReason says why the agent was last woken: Task or Request.
	// +optional
	WakeReason string `json:"wakeReason,omitempty"`
}

// AgentStatus is the observed state of an agent, rebuilt from the runtime on every pass.
type AgentStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase: starting, running, not_running or suspended.
	// +optional
	Phase AgentPhase `json:"phase,omitempty"`
	// Endpoint is the gateway's base URL.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// EngineVersion is the engine version the gateway runs.
	// +optional
	EngineVersion string `json:"engineVersion,omitempty"`
	// Rendering: Current when the gateway runs this manager's rendering of it (or none runs),
	// Outdated when it runs an earlier manager's and waits for its RenderingRollout wave or its
	// next restart (kube runtime; unset on a runtime without renderings).
	// +optional
	Rendering AgentRendering `json:"rendering,omitempty"`
	// RenderingTarget is this manager's rendering of the gateway (kube runtime): what
	// agentplane.io/allowed-rendering names to let the gateway restart onto it.
	// +optional
	RenderingTarget string `json:"renderingTarget,omitempty"`
	// GatewayTokenSecret names the core Secret that holds the gateway token.
	// +optional
	GatewayTokenSecret string `json:"gatewayTokenSecret,omitempty"`
	// SnapshotCID is the snapshot the workspace was last restored from.
	// +optional
	SnapshotCID string `json:"snapshotCid,omitempty"`
	// LastRestoreAt is the restore request (spec.restoreRequestedAt) that was last carried out.
	// +optional
	LastRestoreAt *metav1.Time `json:"lastRestoreAt,omitempty"`
	// Restarts counts gateway crashes observed by the runtime.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
	// LastRestartAt is the restart request that was last carried out.
	// +optional
	LastRestartAt *metav1.Time `json:"lastRestartAt,omitempty"`
	// Config is what the engine config file was rendered from (the ConfigApplied condition
	// tells whether the last render succeeded).
	// +optional
	Config *AgentConfigStatus `json:"config,omitempty"`
	// InstalledSkills are the CIDs of the skill bundles unpacked in the agent's home
	// (`skills/<slug>/`), written by the Agent controller once it has unpacked spec.skills.
	// +listType=set
	// +optional
	InstalledSkills []string `json:"installedSkills,omitempty"`
	// HoldsSlot: the agent is bound to one slot of its workspace's agent limit (counted in the
	// Workspace's status.agentSlots). Written by the Agent controller only.
	// +optional
	HoldsSlot bool `json:"holdsSlot,omitempty"`
	// DomainReservations are the slots of the per-agent domain limit. Written only with
	// optimistic concurrency.
	// +listType=map
	// +listMapKey=name
	// +optional
	DomainReservations []Reservation `json:"domainReservations,omitempty"`
	// Sleep is the suspend state: why the agent sleeps or is awake, its next scheduled task
	// and its last wake. Written by the Agent controller only.
	// +optional
	Sleep *AgentSleep `json:"sleep,omitempty"`
	// Usage is today's model usage through the platform's model proxy. Written by the proxy's
	// usage recorder only, at a bounded rate.
	// +optional
	Usage *ModelUsage `json:"usage,omitempty"`
	// Conditions: Provisioned, GatewayReady, Suspended.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Agent is an AI agent: one OpenClaw gateway with its workspace, secrets, skills, channels,
// domains and snapshots.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ag,categories=agentplane
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.status.engineVersion`
// +kubebuilder:printcolumn:name="Rendering",type=string,JSONPath=`.status.rendering`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Agent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AgentSpec   `json:"spec,omitempty"`
	Status AgentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentList is a list of Agents.
type AgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Agent `json:"items"`
}

func init() {
	register(&Agent{}, &AgentList{})
}
