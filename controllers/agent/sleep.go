package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/watchfilter"
)

// Defaults of SleepOptions.
const (
	// DefaultWakeLead: a suspended agent is woken this long before its next scheduled task
	// (a cold gateway boots in about 10 s locally, a pod on a real node in 15-30 s).
	DefaultWakeLead = 90 * time.Second
	// DefaultWakeWindow: how long a woken agent with no idle policy stays awake after its
	// last request before it sleeps again.
	DefaultWakeWindow = 5 * time.Minute
	// DefaultTaskGrace: a woken agent stays awake at least this long after its task's time,
	// so the run can finish before the idle policy suspends it again.
	DefaultTaskGrace = 2 * time.Minute
	// suspendRetry re-tries listing the tasks of an agent that should sleep.
	suspendRetry = 30 * time.Second
)

// Sleep metrics, on controller-runtime's registry (the manager's /metrics).
var (
	suspensions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentplane_agent_suspensions_total",
		Help: "Agents put to sleep, by reason (Suspended: spec.suspended; Idle: the idle policy).",
	}, []string{"reason"})
	wakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentplane_agent_wakes_total",
		Help: "Sleeping agents woken, by reason (Task: ahead of a scheduled task; Request: a request needed the gateway; Message: the channel relay woke it for a message; Resume).",
	}, []string{"reason"})
)

func init() { crmetrics.Registry.MustRegister(suspensions, wakes) }

// SleepOptions tune suspension; zero values take the defaults above.
type SleepOptions struct {
	WakeLead, WakeWindow, TaskGrace time.Duration
}

func (o SleepOptions) withDefaults() SleepOptions {
	if o.WakeLead <= 0 {
		o.WakeLead = DefaultWakeLead
	}
	if o.WakeWindow <= 0 {
		o.WakeWindow = DefaultWakeWindow
	}
	if o.TaskGrace <= 0 {
		o.TaskGrace = DefaultTaskGrace
	}
	return o
}

// sleepDecision is whether the agent should sleep now, why, and when that may change.
type sleepDecision struct {
	asleep bool
	// reason is the Suspended condition's reason.
	reason string
	// wakeForTask: the agent sleeps and its next task is due within the lead: wake it now.
	wakeForTask bool
	// recheck is when the decision changes by itself (zero: only on a change).
	recheck time.Time
}

// decideSleep is the suspend policy, a pure function of the agent, its idle policy and now.
//
//   - Not suspended and no idle policy: awake.
//   - The agent's last activity is the latest of its creation, the facade's last-active
//     stamp, spec.wakeRequestedAt and a wake for a task.
//   - Idle policy (idleAfter > 0): asleep once the last activity is idleAfter old.
//   - spec.suspended: asleep unless woken (by a request or for a task) and its last activity
//     is younger than the wake window (idleAfter, or the default window).
//   - A task wake keeps the agent awake at least until the task's time plus the grace.
//   - An asleep agent with a known next task wakes opts.WakeLead before it.
func decideSleep(agent *agentsv1.Agent, idleAfter time.Duration, now time.Time, opts SleepOptions) sleepDecision {
	suspended, idle := agent.Spec.Suspended, idleAfter > 0
	if !suspended && !idle {
		return sleepDecision{reason: agentsv1.ReasonAwake}
	}
	window := opts.WakeWindow
	if idle {
		window = idleAfter
	}
	sl := agent.Status.Sleep
	var reqWake, taskWake time.Time
	if t := agent.Spec.WakeRequestedAt; t != nil {
		reqWake = t.Time
	}
	if sl != nil && sl.WokenAt != nil {
		taskWake = sl.WokenAt.Time
	}
	last := latest(agent.CreationTimestamp.Time, lastActive(agent), reqWake, taskWake)

	var until time.Time
	switch {
	case suspended && reqWake.IsZero() && taskWake.IsZero():
		// Asleep as asked, never woken since.
	default:
		until = last.Add(window)
	}
	if sl != nil && sl.WakeReason == agentsv1.WakeForTask && !taskWake.IsZero() && sl.NextTaskAt != nil {
		until = latest(until, sl.NextTaskAt.Add(opts.TaskGrace))
	}
	if now.Before(until) {
		d := sleepDecision{reason: agentsv1.ReasonAwake, recheck: until}
		if suspended || !taskWake.IsZero() || !reqWake.IsZero() {
			d.reason = wokenReason(agent, reqWake, taskWake)
		}
		return d
	}

	d := sleepDecision{asleep: true, reason: agentsv1.ReasonIdle}
	if suspended {
		d.reason = agentsv1.ReasonSuspendedBySpec
	}
	if sl != nil && sl.NextTaskAt != nil {
		wakeAt := sl.NextTaskAt.Add(-opts.WakeLead)
		if !now.Before(wakeAt) && (taskWake.IsZero() || taskWake.Before(wakeAt)) {
			// Due (or overdue, after a manager outage: the engine catches up on its own and
			// the next sleep lists the tasks anew).
			return sleepDecision{reason: agentsv1.ReasonWokenForTask, wakeForTask: true}
		}
		if now.Before(wakeAt) {
			d.recheck = wakeAt
		}
	}
	return d
}

// wokenReason tells a request's wake from a task's.
func wokenReason(agent *agentsv1.Agent, reqWake, taskWake time.Time) string {
	if !taskWake.IsZero() && taskWake.After(reqWake) {
		return agentsv1.ReasonWokenForTask
	}
	if !reqWake.IsZero() {
		if forMessage(agent, reqWake) {
			return agentsv1.ReasonWokenByMessage
		}
		return agentsv1.ReasonWokenByRequest
	}
	return agentsv1.ReasonAwake
}

// forMessage: the wake request stamped reqWake was the channel relay's, for a message
// (AnnotationMessageWake names it).
func forMessage(agent *agentsv1.Agent, reqWake time.Time) bool {
	t, err := time.Parse(time.RFC3339, agent.Annotations[agentsv1.AnnotationMessageWake])
	return err == nil && t.Equal(reqWake)
}

// lastActive is the facade's last-active stamp (zero when absent or unreadable).
func lastActive(agent *agentsv1.Agent) time.Time {
	t, err := time.Parse(time.RFC3339, agent.Annotations[agentsv1.AnnotationLastActive])
	if err != nil {
		return time.Time{}
	}
	return t
}

func latest(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// losesMessagesAsleep: the agent has a channel whose messages are lost while no gateway is
// connected. Telegram keeps updates for the bot (about 24 h) and the engine fetches them from
// its stored offset on start (deleteWebhook with drop_pending_updates false, verified in
// openclaw 2026.9.6); with the channel relay on, its watch also wakes the agent for them
// (internal/adapters/channelrelay). A relayed Slack channel's events wait in the relay's
// inbox, which wakes the agent; so do a relayed Discord channel's messages: the relay's
// Discord ingress holds the bot's gateway connection, queues what arrives for a sleeping
// agent and wakes it. Slack's own Socket Mode and Discord's own gateway deliver only to a
// connected client; WhatsApp redelivers what arrived offline, but the engine's plugin drops
// (and marks read) every message older than about a minute on a fresh start (openclaw
// 2026.9.6's @openclaw/whatsapp), so those agents are not idled.
func losesMessagesAsleep(agent *agentsv1.Agent, relay ChannelRelay) bool {
	if agent.Status.Config == nil {
		return false
	}
	for _, c := range agent.Status.Config.Channels {
		if c.Removal || c.Type == agentsv1.ChannelTelegram ||
			((c.Type == agentsv1.ChannelSlack || c.Type == agentsv1.ChannelDiscord) && relayed(relay, c.Type)) {
			continue
		}
		return true
	}
	return false
}

// idleAfter is the agent's idle policy: its own spec.idleAfter, else its workspace's.
func (r *Reconciler) idleAfter(ctx context.Context, agent *agentsv1.Agent) (time.Duration, error) {
	if d := agent.Spec.IdleAfter; d != nil {
		return d.Duration, nil
	}
	ws := &agentsv1.Workspace{}
	if err := r.Get(ctx, client.ObjectKey{Name: agent.Namespace}, ws); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if d := ws.Spec.IdleAfter; d != nil {
		return d.Duration, nil
	}
	return 0, nil
}

// reconcileSleep decides whether the agent's gateway should run. Putting an awake agent to
// sleep first lists its scheduled tasks through the running gateway (the engine keeps them;
// a sleeping gateway cannot fire them) so that the controller wakes it ahead of the next one;
// when the list cannot be read from a running gateway the agent stays awake and the list is
// retried, rather than a task missed. It returns whether the gateway should stop and when
// to look again (zero: no timer).
func (r *Reconciler) reconcileSleep(ctx context.Context, agent *agentsv1.Agent) (bool, time.Duration, error) {
	idle, err := r.idleAfter(ctx, agent)
	if err != nil {
		return false, 0, err
	}
	if idle > 0 && losesMessagesAsleep(agent, r.ChannelRelay) {
		idle = 0 // never idled: it would miss its channel's messages (spec.suspended still applies)
	}
	r.recallSleep(agent)
	now := r.Clock.Now()
	opts := r.Sleep.withDefaults()
	d := decideSleep(agent, idle, now, opts)
	wasAsleep := meta.IsStatusConditionTrue(agent.Status.Conditions, agentsv1.ConditionSuspended)
	cond := metav1.Condition{Type: agentsv1.ConditionSuspended, ObservedGeneration: agent.Generation, Reason: d.reason}

	switch {
	case d.wakeForTask:
		sl := sleepOf(agent)
		sl.WokenAt, sl.WakeReason, sl.NextWakeAt = ptrTime(now), agentsv1.WakeForTask, nil
		cond.Status, cond.Message = metav1.ConditionFalse, "woken ahead of the scheduled task at "+sl.NextTaskAt.UTC().Format(time.RFC3339)
		meta.SetStatusCondition(&agent.Status.Conditions, cond)
		r.event(agent, corev1.EventTypeNormal, "Woken", "Wake", "woken for the scheduled task at %s", sl.NextTaskAt.UTC().Format(time.RFC3339))
		wakes.WithLabelValues(agentsv1.WakeForTask).Inc()
		// Stay awake until the task has run: decide again once the window may end.
		return false, recheckIn(decideSleep(agent, idle, now, opts).recheck, now), nil

	case !d.asleep:
		if !r.keepAwake(agent, d, cond, wasAsleep, idle) {
			return false, 0, nil
		}
		return false, recheckIn(d.recheck, now), nil

	case wasAsleep:
		cond.Status, cond.Message = metav1.ConditionTrue, sleepMessage(d.reason, agent.Status.Sleep)
		meta.SetStatusCondition(&agent.Status.Conditions, cond)
		return true, recheckIn(d.recheck, now), nil
	}
	return r.suspend(ctx, agent, d.reason, cond, idle, now, opts)
}

// recheckIn is how long until t, at least a second (zero: t is zero, no timer).
func recheckIn(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(t.Sub(now), time.Second)
}

// keepAwake records that the agent is awake (d), woken now if it was asleep; it says
// whether the agent has a sleep policy to report the condition cond of (false: no policy at
// all, the condition is removed).
func (r *Reconciler) keepAwake(agent *agentsv1.Agent, d sleepDecision, cond metav1.Condition, wasAsleep bool, idle time.Duration) bool {
	cond.Status, cond.Message = metav1.ConditionFalse, awakeMessage(agent, d.reason)
	if wasAsleep {
		r.event(agent, corev1.EventTypeNormal, "Resumed", "Resume", "the agent is awake (%s)", d.reason)
		switch d.reason {
		case agentsv1.ReasonWokenByRequest:
			wakes.WithLabelValues(agentsv1.WakeForRequest).Inc()
		case agentsv1.ReasonWokenByMessage:
			wakes.WithLabelValues(agentsv1.WakeForMessage).Inc()
		case agentsv1.ReasonAwake:
			wakes.WithLabelValues("Resume").Inc()
		}
	}
	if sl := agent.Status.Sleep; sl != nil {
		sl.NextWakeAt = nil
	}
	if !agent.Spec.Suspended && idle == 0 {
		// No policy at all: nothing to report (and nothing added to thousands of agents).
		meta.RemoveStatusCondition(&agent.Status.Conditions, agentsv1.ConditionSuspended)
		return false
	}
	meta.SetStatusCondition(&agent.Status.Conditions, cond)
	return true
}

// awakeMessage is the Suspended condition's message of an awake agent.
func awakeMessage(agent *agentsv1.Agent, reason string) string {
	if sl := agent.Status.Sleep; reason == agentsv1.ReasonWokenForTask && sl != nil && sl.NextTaskAt != nil {
		return "awake for its scheduled task at " + sl.NextTaskAt.UTC().Format(time.RFC3339)
	}
	return "the agent is awake"
}

// suspend puts an awake agent that should sleep (for reason) to sleep: it learns its next
// task first; when that cannot be read the agent stays awake and it is retried.
//
// An agent whose window ends while its next task is due within the lead, or runs, stays
// awake for it instead: stopping the gateway would only start it again, and an engine that
// starts after a task's time defers the missed run (OpenClaw defers missed agent turns two
// minutes past its start), so a task woken for could be put off again and again. A suspend
// the spec has just asked for is honoured all the same (the agent then wakes for the task).
func (r *Reconciler) suspend(ctx context.Context, agent *agentsv1.Agent, reason string, cond metav1.Condition, idle time.Duration, now time.Time, opts SleepOptions) (bool, time.Duration, error) {
	next, running, err := r.nextTask(ctx, agent)
	if err != nil {
		log.FromContext(ctx).Info("cannot list the agent's scheduled tasks: it stays awake until they can be read", "error", err.Error())
		cond.Status, cond.Reason = metav1.ConditionFalse, agentsv1.ReasonSuspendPending
		cond.Message = "the agent's scheduled tasks cannot be listed yet; it is suspended once they can"
		meta.SetStatusCondition(&agent.Status.Conditions, cond)
		return false, suspendRetry, nil
	}
	// A task overdue by more than the grace is not about to run: the agent is not held for it.
	dueSoon := !next.IsZero() && !now.Before(next.Add(-opts.WakeLead)) && now.Before(next.Add(opts.TaskGrace))
	if (running || dueSoon) && !suspendAsked(agent) {
		if running && (next.IsZero() || next.After(now)) {
			next = now
		}
		holdForTask(agent, cond, next, now)
		return false, recheckIn(decideSleep(agent, idle, now, opts).recheck, now), nil
	}
	sl := sleepOf(agent)
	sl.SuspendedAt, sl.WokenAt, sl.WakeReason, sl.NextTaskAt, sl.NextWakeAt = ptrTime(now), nil, "", nil, nil
	if !next.IsZero() {
		sl.NextTaskAt, sl.NextWakeAt = ptrTime(next), ptrTime(next.Add(-opts.WakeLead))
	}
	cond.Status, cond.Message = metav1.ConditionTrue, sleepMessage(reason, sl)
	meta.SetStatusCondition(&agent.Status.Conditions, cond)
	r.event(agent, corev1.EventTypeNormal, "Suspended", "Suspend", "%s", cond.Message)
	suspensions.WithLabelValues(reason).Inc()
	d := decideSleep(agent, idle, now, opts)
	if d.wakeForTask {
		return true, time.Second, nil // its next task is due within the lead already
	}
	return true, recheckIn(d.recheck, now), nil
}

// holdForTask keeps an agent that should sleep awake for its task at next, as if woken
// for it (awake until the task's time and its grace).
func holdForTask(agent *agentsv1.Agent, cond metav1.Condition, next, now time.Time) {
	sl := sleepOf(agent)
	sl.NextTaskAt, sl.NextWakeAt, sl.WakeReason = ptrTime(next), nil, agentsv1.WakeForTask
	if sl.WokenAt == nil {
		sl.WokenAt = ptrTime(now)
	}
	cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, agentsv1.ReasonWokenForTask, awakeMessage(agent, agentsv1.ReasonWokenForTask)
	meta.SetStatusCondition(&agent.Status.Conditions, cond)
}

// suspendAsked: the spec asks for the sleep and this pass is the first over it (a suspend
// just asked for, not the end of a wake).
func suspendAsked(agent *agentsv1.Agent) bool {
	return agent.Spec.Suspended && agent.Status.ObservedGeneration != agent.Generation
}

// nextTask is the earliest next run of the agent's enabled scheduled tasks (zero: none) and
// whether one of them runs now. A gateway that does not run has nothing to list: the
// previous answer stands.
func (r *Reconciler) nextTask(ctx context.Context, agent *agentsv1.Agent) (next time.Time, running bool, err error) {
	if r.Engine == nil || agent.Status.Phase != agentsv1.AgentRunning {
		if sl := agent.Status.Sleep; sl != nil && sl.NextTaskAt != nil && sl.NextTaskAt.After(r.Clock.Now()) {
			return sl.NextTaskAt.Time, false, nil
		}
		return time.Time{}, false, nil
	}
	cmd := r.Engine.CronListCommand()
	res, err := r.Runtime.Exec(ctx, agent, runtime.ExecRequest{Argv: cmd.Args, Engine: true, Env: cmd.Env, Timeout: cmd.Timeout})
	if err != nil {
		return time.Time{}, false, err
	}
	tasks, err := r.Engine.ParseCronList(res.Stdout, res.ExitCode)
	if err != nil {
		return time.Time{}, false, err
	}
	for _, t := range tasks {
		running = running || t.Running
		if !t.Enabled || t.NextRunAt == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, t.NextRunAt)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("task %q: next run %q: %w", t.Name, t.NextRunAt, err)
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, running, nil
}

func sleepMessage(reason string, sl *agentsv1.AgentSleep) string {
	m := "suspended as its spec asks"
	if reason == agentsv1.ReasonIdle {
		m = "suspended after its idle time without a request"
	}
	if sl != nil && sl.NextTaskAt != nil {
		m += "; woken for its next task at " + sl.NextTaskAt.UTC().Format(time.RFC3339)
	}
	return m
}

func sleepOf(agent *agentsv1.Agent) *agentsv1.AgentSleep {
	if agent.Status.Sleep == nil {
		agent.Status.Sleep = &agentsv1.AgentSleep{}
	}
	return agent.Status.Sleep
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// watchIdlePolicy wakes the workspace's agents when its default idle policy or runtime class
// changes (rare edits; nothing else of a Workspace concerns its agents' passes).
func (r *Reconciler) watchIdlePolicy(b *ctrl.Builder) *ctrl.Builder {
	changed := watchfilter.OnlyUpdates(func(o, n *agentsv1.Workspace) bool {
		return !equality.Semantic.DeepEqual(o.Spec.IdleAfter, n.Spec.IdleAfter) || o.Spec.RuntimeClassName != n.Spec.RuntimeClassName
	})
	return b.Watches(&agentsv1.Workspace{}, handler.EnqueueRequestsFromMapFunc(r.workspaceAgents), builder.WithPredicates(changed))
}

// workspaceAgents lists the agents of a workspace (its namespace) from the cache.
func (r *Reconciler) workspaceAgents(ctx context.Context, o client.Object) []reconcile.Request {
	list := &agentsv1.AgentList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetName())); err != nil {
		log.FromContext(ctx).Error(err, "list the workspace's agents for its new idle policy", "workspace", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
