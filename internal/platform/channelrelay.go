package platform

import (
	"net/http"
	"strings"

	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/channelrelay"
)

// ChannelRelayOptions configure the channel relay (internal/adapters/channelrelay): agents call
// their Telegram bot through the platform, which keeps the bot's token and wakes a sleeping
// agent when a message waits for it. It is served where the model proxy is (its base URL,
// under /relay/), so it is off when the model proxy is.
type ChannelRelayOptions struct {
	// Disabled hands the channels' tokens to the agents' environment: their gateways call
	// Telegram themselves, and a sleeping agent's messages wait for its next start.
	Disabled bool
	// TelegramAPI is the Bot API origin the relay and its watch call (default
	// https://api.telegram.org; tests, self-hosted Bot API servers).
	TelegramAPI string
}

// relayRoutes tells the controllers where an agent reaches the relay.
type relayRoutes struct{ base string }

// TelegramAPIRoot implements agentctrl.ChannelRelay.
func (r relayRoutes) TelegramAPIRoot() string { return r.base + "/relay/telegram" }

// controllersChannelRelay is the relay as the controllers see it (nil: none).
func (p *Platform) controllersChannelRelay() agentctrl.ChannelRelay {
	if p.modelBase == "" || p.opts.ChannelRelay.Disabled {
		return nil
	}
	return relayRoutes{base: strings.TrimSuffix(p.modelBase, "/")}
}

// setupChannelWatch registers the watch that wakes sleeping agents for their messages (on the
// leader, beside the controllers).
func (p *Platform) setupChannelWatch() error {
	if p.controllersChannelRelay() == nil {
		return nil
	}
	mgr := p.Manager
	p.channelWatch = &channelrelay.Watch{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), TelegramAPI: p.opts.ChannelRelay.TelegramAPI,
		Recorder: eventRecorder(mgr, "agentplane-channel-relay"), Log: p.opts.Log.WithName("channelwatch"),
	}
	return p.channelWatch.SetupWithManager(mgr)
}

// setupChannelRelay builds the relay the facade serves (nil: off).
func (p *Platform) setupChannelRelay() (http.Handler, error) {
	if p.controllersChannelRelay() == nil {
		return nil, nil
	}
	mgr := p.Manager
	return channelrelay.New(channelrelay.Options{
		Authorizer:  &channelrelay.ClusterAuthorizer{Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader()},
		TelegramAPI: p.opts.ChannelRelay.TelegramAPI,
		Log:         p.opts.Log.WithName("channelrelay"),
		Polled: func(agent channelrelay.AgentKey) {
			if p.channelWatch != nil { // this replica runs the watch
				p.channelWatch.Polled(agent)
			}
		},
	})
}
