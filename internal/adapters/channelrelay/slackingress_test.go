package channelrelay

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/fakeslack"
	"github.com/agentplane/agentplane/internal/scheme"
)

const slackAppToken = "xapp-real-app-token"

func slackChannel(agent string, enabled bool) *agentsv1.Channel {
	return &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: agent + "-slack"},
		Spec: agentsv1.ChannelSpec{
			Type: agentsv1.ChannelSlack, AgentRef: agentsv1.LocalObjectReference{Name: agent}, Enabled: &enabled,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: agent + "-slack-tokens", Key: "bot"},
			AppTokenRef: &agentsv1.SecretKeyReference{Name: agent + "-slack-tokens", Key: "app"},
		},
	}
}

func slackTokens(agent string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: agent + "-slack-tokens"},
		Data: map[string][]byte{"bot": []byte(slackBotToken), "app": []byte(slackAppToken)}}
}

func newSlackIngress(t *testing.T, api string, objs ...client.Object) (*SlackIngress, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).Build()
	s := &SlackIngress{Client: c, APIReader: c, Router: &SlackRouter{Authorizer: fakeAuthorizer{}, Log: logr.Discard()},
		SlackAPI: api, Retry: 10 * time.Millisecond, Log: logr.Discard()}
	s.init()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- s.Start(ctx) }()
	eventually(t, "the ingress to start", func() bool {
		return s.sockets.started()
	})
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	})
	return s, c
}

// The ingress holds the Slack app's socket for an agent with an enabled Slack channel, puts a
// message into the agent's inbox, acks it to Slack only then, and wakes the agent if it
// sleeps; the woken gateway gets the message over its relay websocket. Disabling the channel
// ends the socket and drops the inbox.
func TestSlackIngressQueuesAndWakes(t *testing.T) {
	t.Parallel()
	sl := fakeslack.New(fakeslack.Options{BotToken: slackBotToken, AppToken: slackAppToken})
	t.Cleanup(sl.Close)
	s, c := newSlackIngress(t, sl.APIURL(), sleeping("agent", time.Now().Add(-time.Hour)), slackChannel("agent", true), slackTokens("agent"),
		sleeping("off", time.Now()), slackChannel("off", false), slackTokens("off"))
	ctx := context.Background()
	for _, n := range []string{"agent", "off"} {
		if _, err := s.Reconcile(ctx, ctrl.Request{NamespacedName: key(n)}); err != nil {
			t.Fatal(err)
		}
	}
	if !s.Connected(agentKey) || s.Connected(key("off")) {
		t.Fatalf("connected: agent %v, off %v", s.Connected(agentKey), s.Connected(key("off")))
	}
	eventually(t, "the app's socket to connect", func() bool { return sl.Connections() == 1 })

	sl.SendDM("U1", "wake up")
	eventually(t, "Slack's envelope acked", func() bool { return sl.Acked() == 1 })
	if n := s.Router.Pending(agentKey); n != 1 {
		t.Fatalf("the inbox holds %d events, want 1 (acked to Slack only once queued)", n)
	}
	a := &agentsv1.Agent{}
	eventually(t, "the agent to be woken", func() bool {
		return c.Get(ctx, agentKey, a) == nil && a.Spec.WakeRequestedAt != nil
	})
	wokenForMessage(t, a)

	srv, _ := newSlackRelay(t, "http://127.0.0.1:1", fakeAuthorizer{}, s.Router)
	g, _, err := dialGateway(t, srv.URL, slackRelayToken)
	if err != nil {
		t.Fatal(err)
	}
	id, text := g.next()
	if text != "wake up" {
		t.Fatalf("the gateway got %q", text)
	}
	g.ack(id)
	eventually(t, "the inbox to empty", func() bool { return s.Router.Pending(agentKey) == 0 })

	// Disabled: the socket ends, the inbox goes, the gateway is disconnected.
	ch := &agentsv1.Channel{}
	if err := c.Get(ctx, key("agent-slack"), ch); err != nil {
		t.Fatal(err)
	}
	off := false
	ch.Spec.Enabled = &off
	if err := c.Update(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reconcile(ctx, ctrl.Request{NamespacedName: agentKey}); err != nil {
		t.Fatal(err)
	}
	if s.Connected(agentKey) {
		t.Fatal("a disabled channel's socket is still held")
	}
	eventually(t, "the app's socket to close", func() bool { return sl.Connections() == 0 })
	eventually(t, "the gateway to be disconnected", func() bool { return !s.Router.Connected(agentKey) })
}

// An agent put to sleep while its inbox holds what its gateway did not ack is woken by the
// next reconcile.
func TestSlackIngressWakesForWhatWaits(t *testing.T) {
	t.Parallel()
	sl := fakeslack.New(fakeslack.Options{BotToken: slackBotToken, AppToken: slackAppToken})
	t.Cleanup(sl.Close)
	s, c := newSlackIngress(t, sl.APIURL(), sleeping("agent", time.Now().Add(-time.Hour)), slackChannel("agent", true), slackTokens("agent"))
	if err := s.Router.Deliver(agentKey, "e1", message("waiting")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reconcile(context.Background(), ctrl.Request{NamespacedName: agentKey}); err != nil {
		t.Fatal(err)
	}
	a := &agentsv1.Agent{}
	if err := c.Get(context.Background(), agentKey, a); err != nil || a.Spec.WakeRequestedAt == nil {
		t.Fatalf("not woken: %v", err)
	}
}

// A hundred sleep and wake cycles: each message sent while the agent sleeps (no gateway
// connected) wakes it and reaches its next gateway; a gateway that ends before it acks (every
// third cycle) gets the message again on its next connection, which the engine's ingress
// counts once (it keys messages by team, channel and ts, as the gateway here does). Across
// all cycles, every message is handled exactly once and in the order sent, and Slack has
// every envelope acked.
func TestSlackHundredSleepWakeCycles(t *testing.T) {
	t.Parallel()
	sl := fakeslack.New(fakeslack.Options{BotToken: slackBotToken, AppToken: slackAppToken})
	t.Cleanup(sl.Close)
	s, c := newSlackIngress(t, sl.APIURL(), sleeping("agent", time.Now().Add(-time.Hour)), slackChannel("agent", true), slackTokens("agent"))
	ctx := context.Background()
	if _, err := s.Reconcile(ctx, ctrl.Request{NamespacedName: agentKey}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the app's socket to connect", func() bool { return sl.Connections() == 1 })
	srv, _ := newSlackRelay(t, "http://127.0.0.1:1", fakeAuthorizer{}, s.Router)

	const cycles = 100
	var handled []string             // what the "engine" handled, in order
	seen := map[string]bool{}        // its ingress's dedupe keys (ts)
	frames := 0                      // frames received, repeats included
	sleep := func(since time.Time) { // the agent's sleep: Suspended, no wake pending
		a := &agentsv1.Agent{}
		if err := c.Get(ctx, agentKey, a); err != nil {
			t.Fatal(err)
		}
		a.Spec.WakeRequestedAt = nil
		a.Status.Conditions[0].Status = metav1.ConditionTrue
		a.Status.Conditions[0].LastTransitionTime = metav1.NewTime(since)
		if err := c.Update(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	for i := range cycles {
		sleep(time.Now().Add(-time.Minute))
		text := "message " + strconv.Itoa(i)
		sl.SendDM("U1", text)
		a := &agentsv1.Agent{}
		eventually(t, "the agent to be woken for "+text, func() bool {
			return c.Get(ctx, agentKey, a) == nil && a.Spec.WakeRequestedAt != nil
		})
		g, _, err := dialGateway(t, srv.URL, slackRelayToken)
		if err != nil {
			t.Fatal(err)
		}
		for s.Router.Pending(agentKey) > 0 {
			id, got := g.next()
			frames++
			if !seen[got] { // the engine's dedupe
				seen[got] = true
				handled = append(handled, got)
			}
			if i%3 == 2 && got == text && frames%2 == 1 {
				break // the gateway ends before it acks: the next one gets it again
			}
			ackAndWait(t, s.Router, g, id)
		}
		_ = g.ws.Close()
		eventually(t, "the gateway to be gone", func() bool { return !s.Router.Connected(agentKey) })
	}
	// What waits from the last cycles' unacked gateways comes with one more connection.
	g, _, err := dialGateway(t, srv.URL, slackRelayToken)
	if err != nil {
		t.Fatal(err)
	}
	for s.Router.Pending(agentKey) > 0 {
		id, got := g.next()
		frames++
		if !seen[got] {
			seen[got] = true
			handled = append(handled, got)
		}
		ackAndWait(t, s.Router, g, id)
	}
	if len(handled) != cycles {
		t.Fatalf("handled %d messages of %d", len(handled), cycles)
	}
	for i, got := range handled {
		if want := "message " + strconv.Itoa(i); got != want {
			t.Fatalf("message %d is %q, want %q (out of order)", i, got, want)
		}
	}
	eventually(t, "every envelope acked to Slack", func() bool { return sl.Unacked() == 0 && sl.Acked() == cycles })
	t.Logf("%d cycles: %d messages handled once each, in order; %d frames delivered (repeats after an unacked gateway included)", cycles, len(handled), frames)
}

// ackAndWait acks id and waits until the inbox no longer holds it.
func ackAndWait(t *testing.T, r *SlackRouter, g *gateway, id string) {
	t.Helper()
	before := r.Pending(agentKey)
	g.ack(id)
	eventually(t, "the ack of "+id+" to land", func() bool { return r.Pending(agentKey) < before })
}
