package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChannelTypes are every ChannelType, in the order the REST API lists and documents them.
var ChannelTypes = []ChannelType{ChannelTelegram, ChannelSlack, ChannelDiscord, ChannelWhatsApp}

// ChannelType is a chat network an agent can be reached on.
// +kubebuilder:validation:Enum=telegram;slack;discord;whatsapp
type ChannelType string

const (
	ChannelTelegram ChannelType = "telegram"
	ChannelSlack    ChannelType = "slack"
	ChannelDiscord  ChannelType = "discord"
	ChannelWhatsApp ChannelType = "whatsapp"
)

// DMPolicy decides who may talk to the agent in direct messages (OpenClaw's dmPolicy).
// +kubebuilder:validation:Enum=pairing;allowlist;open;disabled
type DMPolicy string

// ChannelSpec connects an agent to a chat network. Tokens live in core Secrets; this object
// only references them.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'slack' || has(self.appTokenRef)",message="slack needs appTokenRef"
// +kubebuilder:validation:XValidation:rule="self.type == 'whatsapp' || has(self.botTokenRef)",message="botTokenRef is required for this channel type"
// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type",message="type is immutable"
// +kubebuilder:validation:XValidation:rule="self.agentRef == oldSelf.agentRef",message="agentRef is immutable"
type ChannelSpec struct {
	// AgentRef is the agent this channel belongs to.
	AgentRef LocalObjectReference `json:"agentRef"`
	// Type of chat network.
	Type ChannelType `json:"type"`
	// BotTokenRef is the bot token (telegram, slack, discord).
	// +optional
	BotTokenRef *SecretKeyReference `json:"botTokenRef,omitempty"`
	// AppTokenRef is the Slack app-level token (socket mode).
	// +optional
	AppTokenRef *SecretKeyReference `json:"appTokenRef,omitempty"`
	// DMPolicy decides who may message the agent directly.
	// +kubebuilder:default=pairing
	// +optional
	DMPolicy DMPolicy `json:"dmPolicy,omitempty"`
	// AllowFrom lists the senders allowed when dmPolicy is allowlist.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=set
	// +optional
	AllowFrom []string `json:"allowFrom,omitempty"`
	// Enabled turns the channel on or off without removing it.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// ApplyRequestedAt, set to a new time, asks for the channel to be checked and applied
	// again: its tokens re-read, a failed plugin install retried and the agent's engine config
	// rendered anew (the REST facade sets it on every setup request, as restartRequestedAt
	// restarts an agent). Microsecond precision: two requests in one second are two requests.
	// +optional
	ApplyRequestedAt *metav1.MicroTime `json:"applyRequestedAt,omitempty"`
}

// ChannelStatus is the observed state of a channel.
type ChannelStatus struct {
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Configured is true once the engine config carries the channel.
	// +optional
	Configured bool `json:"configured,omitempty"`
	// BotTokenHint shows the last characters of the bot token, never the token.
	// +optional
	BotTokenHint string `json:"botTokenHint,omitempty"`
	// AppTokenHint shows the last characters of the app token, never the token.
	// +optional
	AppTokenHint string `json:"appTokenHint,omitempty"`
	// PluginInstallFailures counts the failed installs of the channel's engine plugin since
	// the last one that succeeded (up to the number that makes the verdict): the controller retries a failure it may outlive (the
	// registry or the agent's gateway busy or down) until it has failed this many times in a
	// row (controllers/channel: maxPluginInstallAttempts), then reports it as a failure.
	// +optional
	PluginInstallFailures int32 `json:"pluginInstallFailures,omitempty"`
	// Conditions: Configured, PluginInstalled and Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Channel connects an agent to telegram, slack, discord or whatsapp.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ch,categories=agentplane
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.agentRef.name`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Configured",type=boolean,JSONPath=`.status.configured`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Channel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ChannelSpec   `json:"spec,omitempty"`
	Status ChannelStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ChannelList is a list of Channels.
type ChannelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Channel `json:"items"`
}

func init() {
	register(&Channel{}, &ChannelList{})
}
