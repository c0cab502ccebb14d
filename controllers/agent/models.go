package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/channels"
)

// ModelProxy is the platform's model proxy as the controllers see it: which providers it
// serves and where an agent reaches it.
type ModelProxy interface {
	// BaseURL is the engine's baseUrl for provider through the proxy; false: the proxy does
	// not serve the provider (its secret reaches the agent's environment as any other).
	BaseURL(provider string) (string, bool)
}

// ChannelRelay is the platform's channel relay as the controllers see it
// (internal/adapters/channelrelay): a relayed channel's token stays in the platform, the
// agent's config points the channel at the relay with a relay token instead.
type ChannelRelay interface {
	// TelegramAPIRoot is the Bot API root agents reach the relay at.
	TelegramAPIRoot() string
	// SlackRelay is where agents reach the relay for Slack: the Web API origin and the relay
	// websocket of the engine's relay mode. ok is false where the relay cannot route Slack
	// (the engine's relay client takes a plain ws:// websocket on loopback only).
	SlackRelay() (api, websocket string, ok bool)
	// DiscordRelay is the Discord REST base (versioned) agents reach the relay at; the engine
	// discovers the relay's gateway websocket from it. ok is false where the relay cannot
	// route Discord (the engine takes plain http and ws on loopback only).
	DiscordRelay() (api string, ok bool)
	// Busy reports whether a call of the agent's that may change something on a chat network
	// (a message sent, edited or deleted) is in flight through the relay (its answer not back
	// yet), or its connected gateway holds a delivered message it has not acked (Slack's): the agent's
	// suspend waits for either (holdSuspend).
	Busy(agent types.NamespacedName) bool
}

// relayed reports whether the platform relays channels of type t.
func relayed(r ChannelRelay, t agentsv1.ChannelType) bool {
	if r == nil {
		return false
	}
	switch t {
	case agentsv1.ChannelTelegram:
		return true
	case agentsv1.ChannelSlack:
		_, _, ok := r.SlackRelay()
		return ok
	case agentsv1.ChannelDiscord:
		_, ok := r.DiscordRelay()
		return ok
	}
	return false
}

// relayToken is the token agent's gateway uses for its relayed channel ch: for Telegram and
// Discord the relay token of the bot its token names, for Slack the agent's Slack relay
// token; "" while the channel lacks a token the relay needs (Slack: the bot and the app
// token).
func (r *Reconciler) relayToken(ctx context.Context, agent *agentsv1.Agent, ch *agentsv1.Channel, gatewayToken string) (string, error) {
	if gatewayToken == "" {
		return "", nil
	}
	refs := []*agentsv1.SecretKeyReference{ch.Spec.BotTokenRef}
	if ch.Spec.Type == agentsv1.ChannelSlack {
		refs = append(refs, ch.Spec.AppTokenRef)
	}
	toks := make([]string, len(refs))
	for i, ref := range refs {
		if ref == nil {
			return "", nil
		}
		tok, err := channels.ReadSecretKey(ctx, r.apiReader(), ch.Namespace, ref)
		if err != nil || tok == "" {
			return "", wrapChannel(ch, err)
		}
		toks[i] = tok
	}
	switch ch.Spec.Type {
	case agentsv1.ChannelSlack:
		return auth.NewSlackRelayToken(agent.Namespace, agent.Name, gatewayToken), nil
	case agentsv1.ChannelDiscord:
		return auth.NewDiscordRelayToken(auth.RelayDiscordBotID(toks[0]), agent.Namespace, agent.Name, gatewayToken), nil
	}
	return auth.NewTelegramRelayToken(auth.RelayBotID(toks[0]), agent.Namespace, agent.Name, gatewayToken), nil
}

// relayChannel points c, agent's channel, at the relay with its relay token tok.
func relayChannel(relay ChannelRelay, agent *agentsv1.Agent, c *engine.Channel, tok string) {
	c.BotToken = tok
	switch c.Type {
	case string(agentsv1.ChannelTelegram):
		c.APIRoot = relay.TelegramAPIRoot()
	case string(agentsv1.ChannelSlack):
		c.APIRoot, c.RelayURL, _ = relay.SlackRelay()
		c.GatewayID = agent.Namespace + "/" + agent.Name
	case string(agentsv1.ChannelDiscord):
		c.APIRoot, _ = relay.DiscordRelay()
	}
}

func wrapChannel(ch *agentsv1.Channel, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("channel %s: %w", ch.Name, err)
}

// proxied reports whether sec's key stays in the model proxy instead of the agent.
func proxied(p ModelProxy, sec *agentsv1.AgentSecret) bool {
	if p == nil || sec.Spec.Provider == "" {
		return false
	}
	_, ok := p.BaseURL(sec.Spec.Provider)
	return ok
}

// proxiedProviders are the agent's attached secrets whose provider the model proxy serves,
// as engine config entries pointing at the proxy with the agent's proxy credential (derived
// from gatewayToken), sorted by provider.
func (r *Reconciler) proxiedProviders(ctx context.Context, agent *agentsv1.Agent, gatewayToken string) ([]engine.ModelProvider, error) {
	if r.ModelProxy == nil {
		return nil, nil
	}
	var out []engine.ModelProvider
	for _, ref := range agent.Spec.Secrets {
		sec := &agentsv1.AgentSecret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: ref.Name}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				continue // the environment's resolver reports it
			}
			return nil, fmt.Errorf("read secret %s: %w", ref.Name, err)
		}
		if !proxied(r.ModelProxy, sec) {
			continue
		}
		url, _ := r.ModelProxy.BaseURL(sec.Spec.Provider)
		out = append(out, engine.ModelProvider{
			Name: sec.Spec.Provider, BaseURL: url,
			APIKey: auth.NewModelCredential(agent.Namespace, agent.Name, gatewayToken),
		})
	}
	slices.SortFunc(out, func(a, b engine.ModelProvider) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
