package controllers

import (
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/watchfilter"
)

// What the Agent controller (which renders an agent's channels into its engine config and
// environment) and the Channel controller (which reports on each Channel) both read of
// Channels.

// Environment variables that carry channel tokens to the gateway. The engine config's
// SecretRefs name the same variables, so no token is ever written into the config.
const (
	EnvTelegramBotToken = "AGENTPLANE_TELEGRAM_BOT_TOKEN"
	EnvSlackBotToken    = "AGENTPLANE_SLACK_BOT_TOKEN"
	EnvSlackAppToken    = "AGENTPLANE_SLACK_APP_TOKEN"
	EnvDiscordBotToken  = "AGENTPLANE_DISCORD_BOT_TOKEN"
)

// ChannelTokenEnv names the variables holding the bot and app tokens of a channel type (""
// for a token the type does not use).
func ChannelTokenEnv(t agentsv1.ChannelType) (bot, app string) {
	switch t {
	case agentsv1.ChannelTelegram:
		return EnvTelegramBotToken, ""
	case agentsv1.ChannelSlack:
		return EnvSlackBotToken, EnvSlackAppToken
	case agentsv1.ChannelDiscord:
		return EnvDiscordBotToken, ""
	}
	return "", ""
}

// ChannelPlugin is the npm package of a channel type's external OpenClaw plugin ("" for
// telegram, which OpenClaw bundles).
func ChannelPlugin(t agentsv1.ChannelType) string {
	switch t {
	case agentsv1.ChannelSlack, agentsv1.ChannelDiscord, agentsv1.ChannelWhatsApp:
		return "@openclaw/" + string(t)
	}
	return ""
}

// ChannelChanged passes creations, deletions and updates that change the spec or start the
// deletion; status writes do not pass.
func ChannelChanged() predicate.Predicate {
	return watchfilter.Updates(watchfilter.SpecOrDeletion)
}
