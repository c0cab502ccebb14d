package agent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func TestDecideSleep(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	opts := SleepOptions{}.withDefaults() // lead 90s, window 5m, grace 2m
	type tc struct {
		name      string
		suspended bool
		idle      time.Duration
		active    time.Duration // last-active stamp relative to t0 (0: none)
		wakeReq   *metav1.Time
		msgWake   *metav1.Time // the channel relay's wake stamp (AnnotationMessageWake)
		sleep     *agentsv1.AgentSleep
		now       time.Duration
		asleep    bool
		wakeTask  bool
		reason    string
		recheck   time.Duration // relative to t0 (0: none)
	}
	for _, c := range []tc{
		{name: "no policy: awake", now: time.Hour, reason: agentsv1.ReasonAwake},
		{name: "idle policy, recent request", idle: 10 * time.Minute, active: 55 * time.Minute, now: time.Hour,
			reason: agentsv1.ReasonAwake, recheck: 65 * time.Minute},
		{name: "idle policy, quiet too long", idle: 10 * time.Minute, active: 30 * time.Minute, now: time.Hour,
			asleep: true, reason: agentsv1.ReasonIdle},
		{name: "idle counts from creation without requests", idle: 10 * time.Minute, now: 5 * time.Minute,
			reason: agentsv1.ReasonAwake, recheck: 10 * time.Minute},
		{name: "suspended, never woken: asleep even if just active", suspended: true, active: 59 * time.Minute, now: time.Hour,
			asleep: true, reason: agentsv1.ReasonSuspendedBySpec},
		{name: "suspended, woken by a request: awake for the window", suspended: true, wakeReq: at(58 * time.Minute), now: time.Hour,
			reason: agentsv1.ReasonWokenByRequest, recheck: 63 * time.Minute},
		{name: "suspended, woken by a channel message: awake for the window", suspended: true, wakeReq: at(58 * time.Minute), msgWake: at(58 * time.Minute), now: time.Hour,
			reason: agentsv1.ReasonWokenByMessage, recheck: 63 * time.Minute},
		{name: "suspended, a request after the message's wake", suspended: true, wakeReq: at(59 * time.Minute), msgWake: at(58 * time.Minute), now: time.Hour,
			reason: agentsv1.ReasonWokenByRequest, recheck: 64 * time.Minute},
		{name: "suspended, request wake over", suspended: true, wakeReq: at(50 * time.Minute), now: time.Hour,
			asleep: true, reason: agentsv1.ReasonSuspendedBySpec},
		{name: "asleep, task far away: timer at task minus lead", suspended: true, now: time.Hour,
			sleep:  &agentsv1.AgentSleep{NextTaskAt: at(2 * time.Hour)},
			asleep: true, reason: agentsv1.ReasonSuspendedBySpec, recheck: 2*time.Hour - 90*time.Second},
		{name: "asleep, task within the lead: wake", idle: time.Minute, now: 2*time.Hour - time.Minute,
			sleep:    &agentsv1.AgentSleep{NextTaskAt: at(2 * time.Hour)},
			wakeTask: true, reason: agentsv1.ReasonWokenForTask},
		{name: "asleep, task overdue (manager was down): wake", suspended: true, now: 3 * time.Hour,
			sleep:    &agentsv1.AgentSleep{NextTaskAt: at(2 * time.Hour)},
			wakeTask: true, reason: agentsv1.ReasonWokenForTask},
		{name: "woken for a task, short idle policy: awake until the task ran", idle: 30 * time.Second, now: 2*time.Hour + 30*time.Second,
			sleep:  &agentsv1.AgentSleep{NextTaskAt: at(2 * time.Hour), WokenAt: at(2*time.Hour - 90*time.Second), WakeReason: agentsv1.WakeForTask},
			reason: agentsv1.ReasonWokenForTask, recheck: 2*time.Hour + 2*time.Minute},
		{name: "woken for a task, grace over: asleep, no second wake for the same task", idle: 30 * time.Second, now: 2*time.Hour + 3*time.Minute,
			sleep:  &agentsv1.AgentSleep{NextTaskAt: at(2 * time.Hour), WokenAt: at(2*time.Hour - 90*time.Second), WakeReason: agentsv1.WakeForTask},
			asleep: true, reason: agentsv1.ReasonIdle},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}
			a.Spec.Suspended, a.Spec.WakeRequestedAt, a.Status.Sleep = c.suspended, c.wakeReq, c.sleep
			if c.active != 0 {
				metav1.SetMetaDataAnnotation(&a.ObjectMeta, agentsv1.AnnotationLastActive, t0.Add(c.active).Format(time.RFC3339))
			}
			if c.msgWake != nil {
				metav1.SetMetaDataAnnotation(&a.ObjectMeta, agentsv1.AnnotationMessageWake, c.msgWake.Format(time.RFC3339))
			}
			d := decideSleep(a, c.idle, t0.Add(c.now), opts)
			if d.asleep != c.asleep || d.wakeForTask != c.wakeTask || d.reason != c.reason {
				t.Fatalf("decideSleep = %+v, want asleep=%v wakeForTask=%v reason=%s", d, c.asleep, c.wakeTask, c.reason)
			}
			var want time.Time
			if c.recheck != 0 {
				want = t0.Add(c.recheck)
			}
			if !d.recheck.Equal(want) {
				t.Errorf("recheck = %v, want %v", d.recheck, want)
			}
		})
	}
}

func TestLosesMessagesAsleep(t *testing.T) {
	with := func(types ...agentsv1.ChannelType) *agentsv1.Agent {
		a := &agentsv1.Agent{}
		a.Status.Config = &agentsv1.AgentConfigStatus{}
		for _, ty := range types {
			a.Status.Config.Channels = append(a.Status.Config.Channels, agentsv1.RenderedChannel{Type: ty, Name: string(ty)})
		}
		return a
	}
	slackRelay := &testChannelRelay{slack: true}
	discordRelay := &testChannelRelay{discord: true}
	bothRelay := &testChannelRelay{slack: true, discord: true}
	for _, c := range []struct {
		a     *agentsv1.Agent
		relay ChannelRelay
		want  bool
	}{
		{&agentsv1.Agent{}, nil, false},
		{with(), nil, false},
		{with(agentsv1.ChannelTelegram), nil, false},
		{with(agentsv1.ChannelTelegram, agentsv1.ChannelSlack), nil, true},
		{with(agentsv1.ChannelTelegram, agentsv1.ChannelSlack), &testChannelRelay{}, true}, // a relay that cannot route slack
		{with(agentsv1.ChannelTelegram, agentsv1.ChannelSlack), slackRelay, false},
		{with(agentsv1.ChannelSlack, agentsv1.ChannelDiscord), slackRelay, true},
		{with(agentsv1.ChannelDiscord), nil, true},
		{with(agentsv1.ChannelDiscord), &testChannelRelay{}, true}, // a relay that cannot route discord
		{with(agentsv1.ChannelDiscord), discordRelay, false},
		{with(agentsv1.ChannelTelegram, agentsv1.ChannelSlack, agentsv1.ChannelDiscord), bothRelay, false},
		{with(agentsv1.ChannelSlack, agentsv1.ChannelDiscord), discordRelay, true}, // slack not relayed
		{with(agentsv1.ChannelDiscord, agentsv1.ChannelWhatsApp), bothRelay, true},
		{with(agentsv1.ChannelWhatsApp), slackRelay, true},
	} {
		if got := losesMessagesAsleep(c.a, c.relay); got != c.want {
			t.Errorf("losesMessagesAsleep(%v, %v) = %v, want %v", c.a.Status.Config, c.relay, got, c.want)
		}
	}
}
