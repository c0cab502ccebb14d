package platform

import (
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/channelrelay"
	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// ChannelRelayOptions configure the channel relay (internal/adapters/channelrelay): agents call
// their Telegram bot, Slack app and Discord bot through the platform, which keeps their
// tokens, holds the Slack app's socket and the Discord bot's gateway connection and wakes a
// sleeping agent when a message waits for it. It is served where the model proxy is (its base
// URL, under /relay/), so it is off when the model proxy is. Slack and Discord are relayed
// when Slack and Discord are set, and only where agents reach that base on loopback (the
// local runtime): the engine's Slack relay client and its Discord plugin take plain http and
// websockets only there.
type ChannelRelayOptions struct {
	// Disabled hands the channels' tokens to the agents' environment: their gateways call
	// Telegram, Slack and Discord themselves, and a sleeping agent's messages wait for its next
	// start (Telegram) or would be lost (Slack, Discord, whose agents are then not idled).
	Disabled bool
	// TelegramAPI is the Bot API origin the relay and its watch call (default
	// https://api.telegram.org; tests, self-hosted Bot API servers).
	TelegramAPI string
	// SlackAPI is the Web API origin the relay and its Socket Mode connections call (default
	// https://slack.com/api/; tests).
	SlackAPI string
	// Slack relays Slack channels (off by default until the engine's relay mode is proven end
	// to end on the real engine: docs/SECURITY.md, "Channel relay").
	Slack bool
	// Discord relays Discord channels (local runtime only).
	Discord bool
	// DiscordAPI is the Discord REST base the relay and its gateway connections call (default
	// channelrelay.DefaultDiscordAPI; tests).
	DiscordAPI string
	// DiscordCDN, when set, is where the relay fetches the attachments it serves to agents
	// instead of Discord's CDN (tests).
	DiscordCDN string
}

// relayRoutes tells the controllers where an agent reaches the relay.
type relayRoutes struct {
	base           string
	slack, discord bool
	sends          *channelrelay.Sends
	// unacked reports an agent's connected gateway holding deliveries it has not acked.
	unacked func(types.NamespacedName) bool
}

// Busy implements agentctrl.ChannelRelay: this replica's relay's calls in flight, or
// deliveries of its routers that the agent's connected gateway has not acked.
func (r relayRoutes) Busy(agent types.NamespacedName) bool {
	return r.sends.Busy(agent) || (r.unacked != nil && r.unacked(agent))
}

// deliveriesUnacked reports whether agent's gateway, connected to the Slack router, has
// events in its inbox it has not acked (it acks each once handled): a suspend now would close
// its connection with them unacked, and the router would wake the agent at once to deliver
// them again. Discord's router is not asked: its sessions say what they have seen only with
// their heartbeat (every 41 s), longer than a suspend waits.
func (p *Platform) deliveriesUnacked(agent types.NamespacedName) bool {
	r := p.slackRouter
	return r != nil && r.Connected(agent) && r.Pending(agent) > 0
}

// TelegramAPIRoot implements agentctrl.ChannelRelay.
func (r relayRoutes) TelegramAPIRoot() string { return r.base + "/relay/telegram" }

// SlackRelay implements agentctrl.ChannelRelay: only a base on loopback.
func (r relayRoutes) SlackRelay() (string, string, bool) {
	u, err := url.Parse(r.base)
	if !r.slack || err != nil || u.Scheme != "http" || !loopback(u.Hostname()) {
		return "", "", false
	}
	return r.base + "/relay/slack/api/", "ws://" + u.Host + channelrelay.SlackGatewayPath, true
}

// DiscordRelay implements agentctrl.ChannelRelay: only a base on loopback (the engine's
// Discord plugin takes plain http and ws only there).
func (r relayRoutes) DiscordRelay() (string, bool) {
	u, err := url.Parse(r.base)
	if !r.discord || err != nil || u.Scheme != "http" || !loopback(u.Hostname()) {
		return "", false
	}
	return r.base + channelrelay.DiscordAPIPath, true
}

// loopback is what the engine's Slack relay client counts as local: localhost, ::1, 127/8
// (DiscordRelay asks the same of the base).
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// controllersChannelRelay is the relay as the controllers see it (nil: none).
func (p *Platform) controllersChannelRelay() agentctrl.ChannelRelay {
	if p.modelBase == "" || p.opts.ChannelRelay.Disabled {
		return nil
	}
	return relayRoutes{base: strings.TrimSuffix(p.modelBase, "/"), slack: p.opts.ChannelRelay.Slack, discord: p.opts.ChannelRelay.Discord, sends: &p.relaySends,
		unacked: p.deliveriesUnacked}
}

// relayBusy is the relay's Busy for the local runtime (local.Options.Busy: a checkpoint waits
// while a send of the agent's is in flight or a delivery unacked; nil: no relay).
func (p *Platform) relayBusy() func(types.NamespacedName) bool {
	r := p.controllersChannelRelay()
	if r == nil {
		return nil
	}
	return r.Busy
}

// relayEnv is what every local gateway has in its environment for the channels the relay
// routes that read their relay from there (engine.Engine.ChannelEnv: Slack's Web API origin,
// Discord's REST base), from its first start: a relayed channel connected or removed later
// changes only the engine config, which the engine applies without a restart. The runtime
// calls it with the address its gateways reach the relay at (local.Options.GatewayEnv: the
// same for every platform where each gateway has a network namespace of its own).
func (p *Platform) relayEnv(eng engine.Engine) func(platform string) map[string]string {
	r, ok := p.controllersChannelRelay().(relayRoutes)
	if !ok {
		return nil
	}
	return func(platform string) map[string]string {
		if u, err := url.Parse(r.base); err == nil && platform != "" {
			u.Host = platform
			r.base = u.String()
		}
		env := map[string]string{}
		if api, ws, ok := r.SlackRelay(); ok {
			maps.Copy(env, eng.ChannelEnv(engine.Channel{Type: string(agentsv1.ChannelSlack), Enabled: true, APIRoot: api, RelayURL: ws}))
		}
		if api, ok := r.DiscordRelay(); ok {
			maps.Copy(env, eng.ChannelEnv(engine.Channel{Type: string(agentsv1.ChannelDiscord), Enabled: true, APIRoot: api}))
		}
		return env
	}
}

// slackRelayed reports whether the relay routes Slack.
func (p *Platform) slackRelayed() bool {
	r := p.controllersChannelRelay()
	if r == nil {
		return false
	}
	_, _, ok := r.SlackRelay()
	return ok
}

// relayAuthorizer reads relay tokens' agents and channels from the manager.
func (p *Platform) relayAuthorizer() channelrelay.Authorizer {
	return &channelrelay.ClusterAuthorizer{Cache: p.Manager.GetClient(), APIReader: p.Manager.GetAPIReader()}
}

// setupChannelWatch registers what wakes sleeping agents for their messages (on the leader,
// beside the controllers): the Telegram watch, and the Slack ingress, which holds the Slack
// apps' sockets.
func (p *Platform) setupChannelWatch() error {
	if p.controllersChannelRelay() == nil {
		return nil
	}
	mgr := p.Manager
	p.channelWatch = &channelrelay.Watch{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), TelegramAPI: p.opts.ChannelRelay.TelegramAPI,
		Recorder: eventRecorder(mgr, "agentplane-channel-relay"), Log: p.opts.Log.WithName("channelwatch"),
	}
	if err := p.channelWatch.SetupWithManager(mgr); err != nil {
		return err
	}
	if p.slackRelayed() {
		p.slackRouter = &channelrelay.SlackRouter{Authorizer: p.relayAuthorizer(), Log: p.opts.Log.WithName("slackrouter")}
		if err := (&channelrelay.SlackIngress{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Router: p.slackRouter, SlackAPI: p.opts.ChannelRelay.SlackAPI,
			Recorder: eventRecorder(mgr, "agentplane-channel-relay"), Log: p.opts.Log.WithName("slackingress"),
		}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if !p.discordRelayed() {
		return nil
	}
	p.discordRouter = &channelrelay.DiscordRouter{Authorizer: p.relayAuthorizer(), Log: p.opts.Log.WithName("discordrouter")}
	return (&channelrelay.DiscordIngress{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Router: p.discordRouter, DiscordAPI: p.opts.ChannelRelay.DiscordAPI,
		Recorder: eventRecorder(mgr, "agentplane-channel-relay"), Log: p.opts.Log.WithName("discordingress"),
	}).SetupWithManager(mgr)
}

// discordRelayed reports whether the relay routes Discord.
func (p *Platform) discordRelayed() bool {
	r := p.controllersChannelRelay()
	if r == nil {
		return false
	}
	_, ok := r.DiscordRelay()
	return ok
}

// setupChannelRelay builds the relay the facade serves (nil: off).
func (p *Platform) setupChannelRelay() (http.Handler, error) {
	if p.controllersChannelRelay() == nil {
		return nil, nil
	}
	relay, err := channelrelay.New(channelrelay.Options{
		Authorizer:  p.relayAuthorizer(),
		TelegramAPI: p.opts.ChannelRelay.TelegramAPI,
		SlackAPI:    p.opts.ChannelRelay.SlackAPI,
		Slack:       p.slackRouter,
		DiscordAPI:  p.opts.ChannelRelay.DiscordAPI,
		Discord:     p.discordRouter,
		DiscordCDN:  p.opts.ChannelRelay.DiscordCDN,
		Sends:       &p.relaySends,
		Log:         p.opts.Log.WithName("channelrelay"),
		Polled: func(agent channelrelay.AgentKey) {
			if p.channelWatch != nil { // this replica runs the watch
				p.channelWatch.Polled(agent)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	p.channelRelay = relay
	return relay, nil
}

// relayQuiesce is the relay's Quiesce for the local runtime (local.Options.Quiesce: the
// agent's channel connections end before its gateway's checkpoint; nil: no relay). The relay
// is built after the runtime, so the hook reads it when a checkpoint calls it.
func (p *Platform) relayQuiesce() func(types.NamespacedName) func() {
	if p.controllersChannelRelay() == nil {
		return nil
	}
	return func(agent types.NamespacedName) func() {
		if p.channelRelay == nil {
			return func() {}
		}
		return p.channelRelay.Quiesce(agent)
	}
}
