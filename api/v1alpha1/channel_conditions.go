package v1alpha1

// ChannelFinalizer lets the Channel controller wait until its agent rendered the channel out
// of the engine config, and delete the token Secrets made for it, before the Channel goes
// away.
const ChannelFinalizer = "agentplane.io/channel"

// Channel condition types.
const (
	// ChannelConfigured is True once the Agent controller rendered this generation of the
	// channel into the engine config (the agent's status.config.channels lists it).
	ChannelConfigured = "Configured"
	// ChannelPluginInstalled is True once the channel's external engine plugin is installed
	// in the agent's home (channels whose plugin is not bundled with the engine).
	ChannelPluginInstalled = "PluginInstalled"
)

// Reasons of the Configured condition. ReasonChannelAgentNotReady means the agent's home
// cannot be reached yet (the channel is rendered once it can) and ReasonChannelRendering
// (Unknown) that the agent has not rendered this generation yet, ReasonChannelPluginRetrying
// (Unknown) that the plugin's install failed and is retried; every other False reason is a
// failure. ReasonAgentNotFound applies too.
const (
	ReasonChannelConfigured    = "Configured"
	ReasonChannelAgentNotReady = "AgentNotReady"
	ReasonChannelRendering     = "Rendering"
	ReasonChannelRemovalFailed = "RemovalFailed"
	ReasonChannelConfigFailed  = "ConfigurationFailed"
	ReasonChannelPluginFailed  = "PluginInstallFailed"
	ReasonChannelPluginRetry   = "PluginInstallRetrying"
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
)
