package v1alpha1

// ChannelFinalizer lets the Channel controller remove the channel from the engine config
// before the Channel goes away.
const ChannelFinalizer = "agentplane.io/channel"

// Channel condition types.
const (
	// ChannelConfigured is True once the channel is written into the engine config.
	ChannelConfigured = "Configured"
	// ChannelPluginInstalled is True once the channel's external engine plugin is installed
	// in the agent's home (channels whose plugin is not bundled with the engine).
	ChannelPluginInstalled = "PluginInstalled"
)

// Reasons of the Configured condition. ReasonChannelAgentNotReady means the agent's home
// cannot be reached yet (the channel is applied once it can); every other False reason is a
// failure. ReasonAgentNotFound applies too.
const (
	ReasonChannelConfigured    = "Configured"
	ReasonChannelAgentNotReady = "AgentNotReady"
	ReasonChannelRemovalFailed = "RemovalFailed"
	ReasonChannelConfigFailed  = "ConfigurationFailed"
	ReasonChannelPluginFailed  = "PluginInstallFailed"
	ReasonChannelTokenNotFound = "TokenNotFound"
	ReasonChannelDuplicate     = "Duplicate"
)

// Reasons of the PluginInstalled condition.
const (
	ReasonPluginInstalled     = "Installed"
	ReasonPluginInstallFailed = "InstallFailed"
)

// Labels, annotations and keys of channels.
const (
	// ChannelBotTokenKey and ChannelAppTokenKey are the data keys of a channel's token Secret.
	ChannelBotTokenKey = "botToken"
	ChannelAppTokenKey = "appToken"
	// LabelChannelTokensOf marks the core Secret holding a Channel's tokens (value: the
	// Channel's name). The Channel controller deletes such Secrets with their Channel.
	LabelChannelTokensOf = "agentplane.io/channel-tokens-of"
	// AnnotationChannelRequest is set by the facade to a fresh value on every setup or removal
	// request; the controller copies it to AnnotationChannelHandled once its status holds the
	// verdict on that request. It also makes the Agent controller re-read the channel tokens.
	AnnotationChannelRequest = "agentplane.io/channel-request"
	AnnotationChannelHandled = "agentplane.io/channel-handled"
)
