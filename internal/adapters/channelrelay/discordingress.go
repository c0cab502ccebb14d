package channelrelay

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/channels"
)

// DiscordIntents are the gateway intents the platform identifies its bots with: those the
// engine's Discord plugin asks for by default (guilds, their expressions, guild and direct
// messages and their reactions, message content). Presence, members and voice states are not
// relayed.
const DiscordIntents = discordgo.IntentsGuilds | discordgo.IntentsGuildEmojis | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsGuildMessageReactions | discordgo.IntentsDirectMessageReactions |
	discordgo.IntentMessageContent

// DiscordIngress holds, for each agent with an enabled Discord channel, the bot's gateway
// connection to Discord (with the channel's bot token), hands its events to the agent's
// DiscordRouter, and wakes the agent when a message comes while it sleeps. A token change
// reconnects; a channel disabled or removed, or the agent deleted, ends the connection and
// drops the inbox. It runs on the leader only: Discord delivers a bot's events to each of its
// connections.
type DiscordIngress struct {
	Client    client.Client // reads Agents and Channels from the cache, patches spec.wakeRequestedAt
	APIReader client.Reader // reads channels' token Secrets and the Agent before a wake
	Router    *DiscordRouter
	// DiscordAPI is the versioned REST base the connections discover the gateway at (default
	// DefaultDiscordAPI).
	DiscordAPI string
	Transport  http.RoundTripper // default: http.DefaultTransport
	Recorder   events.EventRecorder
	Clock      clock.Clock // default real
	Log        logr.Logger
	// Retry is the first wait after a connection that failed or ended (it doubles up to a
	// minute).
	Retry time.Duration

	bots loops[string]
}

// SetupWithManager runs the ingress as a controller of Agents (their Channels reconcile them
// too), and ends its connections when the manager stops.
func (s *DiscordIngress) SetupWithManager(mgr ctrl.Manager) error {
	s.init()
	return setupIngress(mgr, "discordingress", agentsv1.ChannelDiscord, s)
}

func (s *DiscordIngress) init() {
	if s.DiscordAPI == "" {
		s.DiscordAPI = DefaultDiscordAPI
	}
	if s.Transport == nil {
		s.Transport = http.DefaultTransport
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.Retry <= 0 {
		s.Retry = 2 * time.Second
	}
}

// Start implements manager.Runnable: the connections live until ctx ends, then Start ends
// them, waits for them and closes the router's gateway sessions.
func (s *DiscordIngress) Start(ctx context.Context) error {
	s.bots.run(ctx)
	s.Router.Close()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *DiscordIngress) NeedLeaderElection() bool { return true }

// Reconcile starts, restarts or ends one agent's bot connection.
func (s *DiscordIngress) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s.init()
	agent := &agentsv1.Agent{}
	if err := s.Client.Get(ctx, req.NamespacedName, agent); err != nil || agent.DeletionTimestamp != nil {
		s.stop(req.NamespacedName, true)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ch, toks, err := channels.EnabledTokens(ctx, s.Client, s.APIReader, agent, agentsv1.ChannelDiscord)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ch == nil || toks.Bot == "" {
		s.stop(req.NamespacedName, ch == nil)
		return ctrl.Result{}, nil
	}
	key := req.NamespacedName
	s.bots.start(key, toks.Bot, func(ctx context.Context) { s.run(ctx, key, toks.Bot) })
	// An agent put to sleep before its gateway saw what waits for it, or whose wake failed, is
	// woken here (and again, with backoff, until the wake is asked for).
	if asleep(agent) && s.Router.Pending(key) > 0 {
		return ctrl.Result{}, wakeAgent(ctx, s.waker(), key, "Discord messages wait for it")
	}
	return ctrl.Result{}, nil
}

// Connected reports whether the ingress holds agent's bot connection (or tries to).
func (s *DiscordIngress) Connected(agent types.NamespacedName) bool { return s.bots.has(agent) }

func (s *DiscordIngress) stop(agent types.NamespacedName, drop bool) {
	s.bots.stop(agent)
	if drop {
		s.Router.Drop(agent)
	}
}

func (s *DiscordIngress) waker() waker {
	return waker{Client: s.Client, APIReader: s.APIReader, Recorder: s.Recorder, Clock: s.Clock, Log: s.Log}
}

// run holds the bot's connection until ctx ends, connecting again (resuming its session where
// Discord allows) after it ends. discordgo's own reconnection is off: it cannot be stopped.
func (s *DiscordIngress) run(ctx context.Context, agent types.NamespacedName, token string) {
	log := s.Log.WithValues("agent", agent.String())
	dg, err := discordgo.New("Bot " + token)
	if err != nil {
		log.Error(err, "cannot make a Discord session")
		return
	}
	dg.ShouldReconnectOnError = false
	dg.StateEnabled = false
	dg.Identify.Intents = DiscordIntents
	dg.Client = &http.Client{Timeout: 20 * time.Second, Transport: rebase{to: strings.TrimSuffix(s.DiscordAPI, "/") + "/", next: s.Transport}}
	dg.LogLevel = -1 // its errors come back to run
	ended := make(chan struct{}, 1)
	dg.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
		select {
		case ended <- struct{}{}:
		default:
		}
	})
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) { s.dispatch(ctx, agent, e) })
	wait := s.Retry
	for ctx.Err() == nil {
		if err := dg.Open(); err != nil {
			log.Info("cannot connect the Discord bot; connecting again later", "error", err.Error(), "retryIn", wait.String())
		} else {
			select {
			case <-ctx.Done():
			case <-ended:
				log.Info("the Discord bot's connection ended; connecting again later", "retryIn", wait.String())
			}
			_ = dg.Close() // the router keeps the bot's last READY and guilds for new sessions
		}
		select {
		case <-ctx.Done():
			return
		case <-s.Clock.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// dispatch hands one event of the bot's connection to the router and wakes the agent for a
// message if it sleeps.
func (s *DiscordIngress) dispatch(ctx context.Context, agent types.NamespacedName, e *discordgo.Event) {
	if e.Operation != 0 || e.Type == "" {
		return
	}
	msg, err := s.Router.Upstream(agent, e.Type, e.RawData)
	if err != nil {
		s.Log.Info("cannot take a Discord message: it is dropped", "agent", agent.String(), "error", err.Error())
		return
	}
	if !msg {
		return
	}
	a := &agentsv1.Agent{}
	if s.Client.Get(ctx, agent, a) != nil || !asleep(a) {
		return
	}
	if err := wakeAgent(ctx, s.waker(), agent, "a Discord message waits for it"); err != nil {
		s.Log.Error(err, "cannot wake the agent for its Discord message", "agent", agent.String())
	}
}

// rebase sends discordgo's requests for Discord's REST base to another one (a test's fake
// Discord, a proxy).
type rebase struct {
	to   string
	next http.RoundTripper
}

func (r rebase) RoundTrip(req *http.Request) (*http.Response, error) {
	rest, ok := strings.CutPrefix(req.URL.String(), discordgo.EndpointAPI)
	if !ok {
		return r.next.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	u, err := out.URL.Parse(r.to + rest)
	if err != nil {
		return nil, err
	}
	out.URL, out.Host = u, u.Host
	return r.next.RoundTrip(out)
}
