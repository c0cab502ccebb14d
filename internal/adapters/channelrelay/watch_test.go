package channelrelay

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/scheme"
)

// sleeping is an agent that sleeps since since (its Suspended condition).
func sleeping(name string, since time.Time) *agentsv1.Agent {
	return &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name},
		Status: agentsv1.AgentStatus{Conditions: []metav1.Condition{{
			Type: agentsv1.ConditionSuspended, Status: metav1.ConditionTrue, Reason: agentsv1.ReasonIdle,
			LastTransitionTime: metav1.NewTime(since),
		}}},
	}
}

func telegramChannel(agent string, enabled bool) *agentsv1.Channel {
	return &agentsv1.Channel{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: agent + "-telegram"},
		Spec: agentsv1.ChannelSpec{
			Type: agentsv1.ChannelTelegram, AgentRef: agentsv1.LocalObjectReference{Name: agent}, Enabled: &enabled,
			BotTokenRef: &agentsv1.SecretKeyReference{Name: agent + "-tokens", Key: "botToken"},
		},
	}
}

func tokenSecret(agent string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: agent + "-tokens"}, Data: map[string][]byte{"botToken": []byte(realToken)}}
}

func newWatch(t *testing.T, api string, objs ...client.Object) (*Watch, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&agentsv1.Channel{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Channel).Spec.AgentRef.Name}
		}).Build()
	w := &Watch{Client: c, APIReader: c, TelegramAPI: api, PollTimeout: 2 * time.Second, Retry: 10 * time.Millisecond, Log: logr.Discard()}
	// What SetupWithManager defaults, without a manager.
	w.Transport, w.Clock = nil, nil
	w.init()
	t.Cleanup(func() {
		for _, n := range []string{"asleep", "awake", "silent", "disabled", "woken"} {
			w.stop(key(n))
		}
	})
	return w, c
}

func key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "team", Name: name}
}

// eventually polls cond until it holds; testenv.EventBound ends a wait for what never comes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(testenv.EventBound)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("never: %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// The watch long-polls the bot of a sleeping agent with a Telegram channel, wakes the agent
// once an update waits and leaves the update to the gateway; it never polls for an agent that
// is awake, has no enabled channel, or has a wake pending.
func TestWatchWakesASleepingAgentForItsMessage(t *testing.T) {
	t.Parallel()
	tg := faketelegram.New(realToken)
	defer tg.Close()
	since := time.Now().Add(-time.Hour)
	awake := sleeping("awake", since)
	awake.Status.Conditions[0].Status = metav1.ConditionFalse
	woken := sleeping("woken", since)
	woken.Spec.WakeRequestedAt = &metav1.Time{Time: time.Now()}
	objs := []client.Object{sleeping("asleep", since), awake, sleeping("silent", since), sleeping("disabled", since), woken}
	for _, n := range []string{"asleep", "awake", "disabled", "woken"} {
		objs = append(objs, telegramChannel(n, n != "disabled"), tokenSecret(n))
	}
	w, c := newWatch(t, tg.URL, objs...)
	ctx := context.Background()
	for _, n := range []string{"asleep", "awake", "silent", "disabled", "woken"} {
		if _, err := w.Reconcile(ctx, ctrl.Request{NamespacedName: key(n)}); err != nil {
			t.Fatalf("reconcile %s: %v", n, err)
		}
	}
	for n, want := range map[string]bool{"asleep": true, "awake": false, "silent": false, "disabled": false, "woken": false} {
		if w.Polling(key(n)) != want {
			t.Errorf("%s: polling %v, want %v", n, !want, want)
		}
	}
	eventually(t, "the watch to poll the bot", func() bool { return len(tg.Calls()) > 0 })

	tg.SendText(42, "wake up")
	a := &agentsv1.Agent{}
	eventually(t, "the agent to be woken", func() bool {
		return c.Get(ctx, key("asleep"), a) == nil && a.Spec.WakeRequestedAt != nil
	})
	wokenForMessage(t, a)
	eventually(t, "the watch to stop polling", func() bool { return !w.Polling(key("asleep")) })
	if tg.Pending() != 1 {
		t.Errorf("the watch took the update off Telegram's queue: %d pending", tg.Pending())
	}
	for _, call := range tg.Calls() {
		if call.Method != "getUpdates" || call.Token != realToken || call.Params["offset"] != nil {
			t.Errorf("the watch called %s %v with %q", call.Method, call.Params, call.Token)
		}
	}
	// The woken agent (a wake pending) is not polled again.
	if _, err := w.Reconcile(ctx, ctrl.Request{NamespacedName: key("asleep")}); err != nil || w.Polling(key("asleep")) {
		t.Errorf("a woken agent is polled again (err %v)", err)
	}
}

// A gateway that asks for its updates through the relay ends the watch's poll of its bot.
func TestWatchStopsWhenTheGatewayPolls(t *testing.T) {
	t.Parallel()
	tg := faketelegram.New(realToken)
	defer tg.Close()
	w, _ := newWatch(t, tg.URL, sleeping("asleep", time.Now()), telegramChannel("asleep", true), tokenSecret("asleep"))
	if _, err := w.Reconcile(context.Background(), ctrl.Request{NamespacedName: key("asleep")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the watch to poll", func() bool { return len(tg.Calls()) > 0 })
	w.Polled(key("asleep"))
	if w.Polling(key("asleep")) {
		t.Fatal("still polling after the gateway asked for its updates")
	}
}

// The manager's stop ends every poll and waits for it.
func TestWatchStopsItsPollsWithTheManager(t *testing.T) {
	t.Parallel()
	tg := faketelegram.New(realToken)
	defer tg.Close()
	w, _ := newWatch(t, tg.URL, sleeping("asleep", time.Now()), telegramChannel("asleep", true), tokenSecret("asleep"))
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error)
	go func() { started <- w.Start(ctx) }()
	eventually(t, "the watch to start", func() bool {
		return w.polls.started()
	})
	if _, err := w.Reconcile(context.Background(), ctrl.Request{NamespacedName: key("asleep")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the watch to poll", func() bool { return len(tg.Calls()) > 0 })
	cancel()
	if err := <-started; err != nil || w.Polling(key("asleep")) {
		t.Fatalf("after the stop: %v, polling %v", err, w.Polling(key("asleep")))
	}
	if _, err := w.Reconcile(context.Background(), ctrl.Request{NamespacedName: key("asleep")}); err != nil || w.Polling(key("asleep")) {
		t.Fatalf("a poll started after the stop (%v)", err)
	}
}

// wokenForMessage fails unless the woken agent a names its wake request as a message's
// (AnnotationMessageWake holds spec.wakeRequestedAt): the Agent controller then reports the
// wake as WokenByMessage and counts it as a Message wake.
func wokenForMessage(t *testing.T, a *agentsv1.Agent) {
	t.Helper()
	if got, want := a.Annotations[agentsv1.AnnotationMessageWake], a.Spec.WakeRequestedAt.UTC().Format(time.RFC3339); got != want {
		t.Errorf("annotation %s = %q, want the wake request's stamp %q", agentsv1.AnnotationMessageWake, got, want)
	}
}
