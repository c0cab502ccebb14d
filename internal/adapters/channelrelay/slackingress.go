package channelrelay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/channels"
)

// SlackIngress holds, for each agent with an enabled Slack channel, the Slack app's Socket
// Mode connection (with the channel's app token), puts each message event into the agent's
// inbox (SlackRouter), acks it to Slack once it is there, and wakes the agent if it sleeps. A
// token change reconnects; a channel disabled or removed, or the agent deleted, ends the
// connection and drops the inbox. Slack sends an envelope that is not acked again, so an event
// the inbox cannot take (full) is left to Slack. It runs on the leader only: Slack spreads an
// app's envelopes over all its connections.
type SlackIngress struct {
	Client    client.Client // reads Agents and Channels from the cache, patches spec.wakeRequestedAt
	APIReader client.Reader // reads channels' token Secrets and the Agent before a wake
	Router    *SlackRouter
	// SlackAPI is the Web API origin the Socket Mode client opens its connection with
	// (default DefaultSlackAPI).
	SlackAPI   string
	HTTPClient *http.Client // default: http.DefaultClient
	Recorder   events.EventRecorder
	Clock      clock.Clock // default real
	Log        logr.Logger
	// Retry is the first wait after a connection that failed (it doubles up to a minute).
	Retry time.Duration

	sockets loops[channels.Tokens]
}

// SetupWithManager runs the ingress as a controller of Agents (their Channels reconcile them
// too), and ends its connections when the manager stops.
func (s *SlackIngress) SetupWithManager(mgr ctrl.Manager) error {
	s.init()
	return setupIngress(mgr, "slackingress", agentsv1.ChannelSlack, s)
}

func (s *SlackIngress) init() {
	if s.SlackAPI == "" {
		s.SlackAPI = DefaultSlackAPI
	}
	if s.HTTPClient == nil {
		s.HTTPClient = http.DefaultClient
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.Retry <= 0 {
		s.Retry = 2 * time.Second
	}
}

// Start implements manager.Runnable: the connections live until ctx ends, then Start ends
// them, waits for them and closes the router's gateway connections.
func (s *SlackIngress) Start(ctx context.Context) error {
	s.sockets.run(ctx)
	s.Router.Close()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *SlackIngress) NeedLeaderElection() bool { return true }

// Reconcile starts, restarts or ends one agent's Socket Mode connection.
func (s *SlackIngress) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	agent := &agentsv1.Agent{}
	if err := s.Client.Get(ctx, req.NamespacedName, agent); err != nil || agent.DeletionTimestamp != nil {
		s.stop(req.NamespacedName, true)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ch, toks, err := channels.EnabledTokens(ctx, s.Client, s.APIReader, agent, agentsv1.ChannelSlack)
	if err != nil {
		return ctrl.Result{}, err
	}
	if ch == nil || toks.Bot == "" || toks.App == "" {
		s.stop(req.NamespacedName, ch == nil)
		return ctrl.Result{}, nil
	}
	key := req.NamespacedName
	s.sockets.start(key, toks, func(ctx context.Context) { s.run(ctx, key, toks) })
	// An agent put to sleep before its gateway acked what waits for it, or whose wake failed,
	// is woken here (and again, with backoff, until the wake is asked for).
	if asleep(agent) && s.Router.Pending(req.NamespacedName) > 0 {
		k := waker{Client: s.Client, APIReader: s.APIReader, Recorder: s.Recorder, Clock: s.Clock, Log: s.Log}
		return ctrl.Result{}, wakeAgent(ctx, k, req.NamespacedName, "Slack messages wait for it")
	}
	return ctrl.Result{}, nil
}

// Connected reports whether the ingress holds agent's Socket Mode connection (or tries to).
func (s *SlackIngress) Connected(agent types.NamespacedName) bool { return s.sockets.has(agent) }

// stop ends agent's connection; drop also forgets its inbox (its channel is gone, not merely
// without a token for now).
func (s *SlackIngress) stop(agent types.NamespacedName, drop bool) {
	s.sockets.stop(agent)
	if drop {
		s.Router.Drop(agent)
	}
}

// run holds the connection until ctx ends, connecting again after a failure.
func (s *SlackIngress) run(ctx context.Context, agent types.NamespacedName, toks channels.Tokens) {
	log := s.Log.WithValues("agent", agent.String())
	wait := s.Retry
	for ctx.Err() == nil {
		api := slack.New(toks.Bot, slack.OptionAppLevelToken(toks.App), slack.OptionAPIURL(s.SlackAPI), slack.OptionHTTPClient(s.HTTPClient))
		sm := socketmode.New(api)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- sm.RunContext(runCtx) }()
		err := s.serve(runCtx, agent, sm, done)
		cancel()
		if ctx.Err() != nil {
			return
		}
		log.Info("the Slack app's Socket Mode connection ended; connecting again later", "error", errString(err), "retryIn", wait.String())
		select {
		case <-ctx.Done():
			return
		case <-s.Clock.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// serve handles the connection's events until it ends.
func (s *SlackIngress) serve(ctx context.Context, agent types.NamespacedName, sm *socketmode.Client, done <-chan error) error {
	for {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("closed")
			}
			return err
		case evt := <-sm.Events:
			switch evt.Type {
			case socketmode.EventTypeInvalidAuth:
				return errors.New("the app token is refused by Slack")
			case socketmode.EventTypeEventsAPI:
				s.handle(ctx, agent, sm, evt.Request)
			case socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive:
				// the engine's relay mode carries message events only
				if evt.Request != nil {
					_ = sm.Ack(*evt.Request)
				}
				s.Log.V(1).Info("a Slack command or interaction the relay cannot carry", "agent", agent.String(), "type", string(evt.Type))
			}
		}
	}
}

// handle puts one Events API envelope into the inbox (message events only: an app_mention
// comes with its message event), acks it to Slack once there, and wakes the agent.
func (s *SlackIngress) handle(ctx context.Context, agent types.NamespacedName, sm *socketmode.Client, req *socketmode.Request) {
	if req == nil {
		return
	}
	var p struct {
		Event struct {
			Type string `json:"type"`
		} `json:"event"`
	}
	_ = json.Unmarshal(req.Payload, &p)
	if p.Event.Type == "message" {
		if err := s.Router.Deliver(agent, req.EnvelopeID, req.Payload); err != nil {
			s.Log.Info("cannot take a Slack event; Slack will send it again", "agent", agent.String(), "error", err.Error())
			return
		}
	}
	if err := sm.Ack(*req); err != nil {
		s.Log.V(1).Info("cannot ack a Slack envelope", "agent", agent.String(), "error", err.Error())
	}
	if p.Event.Type != "message" || !s.sleeping(ctx, agent) {
		return
	}
	k := waker{Client: s.Client, APIReader: s.APIReader, Recorder: s.Recorder, Clock: s.Clock, Log: s.Log}
	if err := wakeAgent(ctx, k, agent, "a Slack message waits for it"); err != nil {
		s.Log.Error(err, "cannot wake the agent for its Slack message", "agent", agent.String())
	}
}

func (s *SlackIngress) sleeping(ctx context.Context, key types.NamespacedName) bool {
	a := &agentsv1.Agent{}
	return s.Client.Get(ctx, key, a) == nil && asleep(a)
}
