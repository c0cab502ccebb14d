package channelrelay

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/channels"
)

// ClusterAuthorizer implements Authorizer from the manager's cache: a relay token is good while
// its agent exists (and is not being deleted), the token matches the agent's current gateway
// token, and the agent's channel of the token's kind is enabled with a bot token (for Telegram,
// of the bot the relay token names). Removing or disabling the channel, rotating the gateway token or deleting the
// agent refuses the next call.
type ClusterAuthorizer struct {
	// Cache reads Agents, Channels and the platform's Secrets (gateway tokens).
	Cache client.Reader
	// APIReader reads a channel's token Secret (users' Secrets are not cached).
	APIReader client.Reader
}

var _ Authorizer = (*ClusterAuthorizer)(nil)

// AuthorizeTelegram implements Authorizer.
func (a *ClusterAuthorizer) AuthorizeTelegram(ctx context.Context, relayToken string) (Grant, error) {
	bot, ns, name, ok := auth.ParseTelegramRelayToken(relayToken)
	if !ok {
		return Grant{}, ErrUnauthorized
	}
	agent, gw, err := a.agent(ctx, ns, name)
	if err != nil {
		return Grant{}, err
	}
	if !auth.VerifyTelegramRelayToken(relayToken, bot, ns, name, gw) {
		return Grant{}, ErrUnauthorized
	}
	real, err := TelegramBotToken(ctx, a.Cache, a.APIReader, agent)
	if err != nil {
		return Grant{}, err
	}
	if real == "" || auth.RelayBotID(real) != bot {
		return Grant{}, ErrUnauthorized
	}
	return Grant{Agent: types.NamespacedName{Namespace: ns, Name: name}, BotToken: real}, nil
}

// AuthorizeSlack implements Authorizer: the agent's Slack channel must be enabled with a bot
// token.
func (a *ClusterAuthorizer) AuthorizeSlack(ctx context.Context, relayToken string) (Grant, error) {
	ns, name, ok := auth.ParseSlackRelayToken(relayToken)
	if !ok {
		return Grant{}, ErrUnauthorized
	}
	agent, gw, err := a.agent(ctx, ns, name)
	if err != nil {
		return Grant{}, err
	}
	if !auth.VerifySlackRelayToken(relayToken, ns, name, gw) {
		return Grant{}, ErrUnauthorized
	}
	_, toks, err := channels.EnabledTokens(ctx, a.Cache, a.APIReader, agent, agentsv1.ChannelSlack)
	if err != nil {
		return Grant{}, err
	}
	if toks.Bot == "" {
		return Grant{}, ErrUnauthorized
	}
	return Grant{Agent: types.NamespacedName{Namespace: ns, Name: name}, BotToken: toks.Bot}, nil
}

// AuthorizeDiscord implements Authorizer: the agent's Discord channel must be enabled with a
// bot token of the bot the relay token names.
func (a *ClusterAuthorizer) AuthorizeDiscord(ctx context.Context, relayToken string) (Grant, error) {
	bot, ns, name, ok := auth.ParseDiscordRelayToken(relayToken)
	if !ok {
		return Grant{}, ErrUnauthorized
	}
	agent, gw, err := a.agent(ctx, ns, name)
	if err != nil {
		return Grant{}, err
	}
	if !auth.VerifyDiscordRelayToken(relayToken, bot, ns, name, gw) {
		return Grant{}, ErrUnauthorized
	}
	_, toks, err := channels.EnabledTokens(ctx, a.Cache, a.APIReader, agent, agentsv1.ChannelDiscord)
	if err != nil {
		return Grant{}, err
	}
	if toks.Bot == "" || auth.RelayDiscordBotID(toks.Bot) != bot {
		return Grant{}, ErrUnauthorized
	}
	return Grant{Agent: types.NamespacedName{Namespace: ns, Name: name}, BotToken: toks.Bot}, nil
}

// agent reads the agent a relay token names and its gateway token (ErrUnauthorized when
// either is missing or the agent is being deleted).
func (a *ClusterAuthorizer) agent(ctx context.Context, ns, name string) (*agentsv1.Agent, string, error) {
	agent := &agentsv1.Agent{}
	if err := a.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, agent); err != nil {
		return nil, "", unauthorizedIfMissing(err)
	}
	if agent.DeletionTimestamp != nil || agent.Status.GatewayTokenSecret == "" {
		return nil, "", ErrUnauthorized
	}
	gw := &corev1.Secret{}
	if err := a.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: agent.Status.GatewayTokenSecret}, gw); err != nil {
		return nil, "", unauthorizedIfMissing(err)
	}
	return agent, string(gw.Data[agentsv1.GatewayTokenDataKey]), nil
}

// TelegramBotToken is the bot token of agent's enabled Telegram channel ("" when it has none,
// or its token Secret or key is missing).
func TelegramBotToken(ctx context.Context, cache, apiReader client.Reader, agent *agentsv1.Agent) (string, error) {
	_, toks, err := channels.EnabledTokens(ctx, cache, apiReader, agent, agentsv1.ChannelTelegram)
	return toks.Bot, err
}

func unauthorizedIfMissing(err error) error {
	if apierrors.IsNotFound(err) {
		return ErrUnauthorized
	}
	return err
}
