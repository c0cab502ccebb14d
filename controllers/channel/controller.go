// Package channel is the Channel controller: it installs a channel's engine plugin and
// reports whether the channel is in its agent's engine config (the Agent controller renders it).
package channel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/channels"
	"github.com/agentplane/agentplane/internal/watchfilter"
)

// Requeue intervals of the Channel controller.
const (
	// channelNotReadyRetry re-tries a channel whose agent cannot be reached yet (its phase
	// changes also trigger a pass).
	channelNotReadyRetry = 15 * time.Second
	// channelFailureRetry re-tries a failed plugin install and re-checks a removal.
	channelFailureRetry = 30 * time.Second
	// channelWaitRetry re-checks a channel waiting for its tokens or its agent.
	channelWaitRetry = time.Minute
	// pluginRetry is the wait before the first retry of a failed plugin install; each further
	// failure doubles it.
	pluginRetry = 10 * time.Second
	// maxPluginInstallAttempts: a plugin install is tried this many times in a row before its
	// failure is the channel's verdict (a rejected plugin fails at once). The registry or the
	// agent's gateway, busy or down, fail an install that a later try completes: a setup
	// request meanwhile waits (202 when its wait ends first) rather than fail.
	maxPluginInstallAttempts = 3
)

// Reconciler installs each Channel's engine plugin in its agent's home and reports
// whether the Agent controller rendered the channel into the agent's engine config (the
// Agent controller alone writes that file: tokens never enter it, it names environment
// variables that SecretEnv fills from the Channel's token Secrets).
type Reconciler struct {
	client.Client
	// APIReader reads live (token Secrets are not cached; agents confirmed gone).
	APIReader client.Reader
	Runtime   runtime.Runtime
	// Engine builds the plugin install and reads its outcome.
	Engine   engine.Engine
	Recorder events.EventRecorder
	// PluginTimeout bounds one plugin install (0: the engine's bound).
	PluginTimeout time.Duration
	// PluginRetry is the wait before the first retry of a failed plugin install (0:
	// pluginRetry); each further failure doubles it.
	PluginRetry time.Duration

	// locks serialize plugin installs into one agent's home by several channels.
	locks sync.Map
}

// +kubebuilder:rbac:groups=agentplane.io,resources=channels,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=agentplane.io,resources=channels/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=channels/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;delete

// Reconcile converges one Channel in the form of every reconciler here (controllers/doc.go).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	ch := &agentsv1.Channel{}
	if err := r.Get(ctx, req.NamespacedName, ch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ch.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, ch)
	}
	if controllerutil.AddFinalizer(ch, agentsv1.ChannelFinalizer) {
		if err := r.Update(ctx, ch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	before := ch.DeepCopy()
	defer func() { controllers.PatchStatus(ctx, r.Client, ch, before, r.statusStep(ch, before), &res, &reterr) }()
	return r.reconcileNormal(ctx, ch)
}

// reconcileNormal installs the plugin, then reads the agent's verdict on this generation:
// the Agent controller renders a channel whose tokens and plugin are in place.
func (r *Reconciler) reconcileNormal(ctx context.Context, ch *agentsv1.Channel) (ctrl.Result, error) {
	agent := &agentsv1.Agent{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ch.Spec.AgentRef.Name}, agent)
	if apierrors.IsNotFound(err) || err == nil && agent.DeletionTimestamp != nil {
		return r.orphaned(ctx, ch)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if dup, err := r.olderSibling(ctx, ch); err != nil {
		return ctrl.Result{}, err
	} else if dup != "" {
		setConfigured(ch, metav1.ConditionFalse, agentsv1.ReasonChannelDuplicate,
			fmt.Sprintf("channel %s already connects agent %s to %s", dup, agent.Name, ch.Spec.Type))
		return ctrl.Result{}, nil
	}
	if missing, err := r.readHints(ctx, ch); err != nil {
		return ctrl.Result{}, err
	} else if missing != "" {
		setConfigured(ch, metav1.ConditionFalse, agentsv1.ReasonChannelTokenNotFound, missing)
		return ctrl.Result{RequeueAfter: channelWaitRetry}, nil
	}
	if controllers.ChannelPlugin(ch.Spec.Type) != "" && !meta.IsStatusConditionTrue(ch.Status.Conditions, agentsv1.ChannelPluginInstalled) {
		installed, err := r.installedLive(ctx, ch)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !installed && agent.Status.Phase != agentsv1.AgentRunning {
			// The install fetches the plugin from the registry through the gateway's network
			// (on the local runtime a command run while the gateway is down has none) and
			// applies it through the gateway: it waits for the gateway.
			return waitForGateway(ch, agent, "")
		}
		if !installed {
			unlock := r.lockAgent(client.ObjectKeyFromObject(agent))
			err = r.installPlugin(ctx, agent, ch.Spec.Type)
			unlock()
		}
		if errors.Is(err, engine.ErrGatewayUnreachable) {
			// The cache saw the agent running, its gateway was not (a restart under way).
			return waitForGateway(ch, agent, err.Error())
		}
		if err != nil {
			return r.failed(ch, err)
		}
		ch.Status.PluginInstallFailures = 0
		meta.SetStatusCondition(&ch.Status.Conditions, metav1.Condition{
			Type: agentsv1.ChannelPluginInstalled, Status: metav1.ConditionTrue, Reason: agentsv1.ReasonPluginInstalled,
			Message: controllers.ChannelPlugin(ch.Spec.Type) + " is installed", ObservedGeneration: ch.Generation,
		})
	}
	status, reason, msg := renderVerdict(agent, ch)
	setConfigured(ch, status, reason, msg)
	if reason == agentsv1.ReasonChannelAgentNotReady {
		return ctrl.Result{RequeueAfter: channelNotReadyRetry}, nil
	}
	return ctrl.Result{}, nil
}

// renderVerdict reads the Configured condition of ch off its agent's status: rendered (this
// generation is in status.config.channels, and the gateway is not restarting), or the
// agent's last render meant to write it and could not (status.config.pendingChannels;
// ConfigApplied says why: a home that cannot be reached, or a failure), or not rendered yet (Unknown: the agent's next status change brings
// the verdict; a starting agent renders once its home is there).
func renderVerdict(agent *agentsv1.Agent, ch *agentsv1.Channel) (metav1.ConditionStatus, string, string) {
	cfg := agent.Status.Config
	if cfg == nil {
		cfg = &agentsv1.AgentConfigStatus{}
	}
	if holds(cfg.Channels, ch) {
		if agent.Status.Phase == agentsv1.AgentStarting {
			// Its tokens came with a restart: the channel works once the gateway is back.
			return metav1.ConditionUnknown, agentsv1.ReasonChannelRendering, fmt.Sprintf("channels.%s is in the engine config; waiting for agent %s's gateway to start", ch.Spec.Type, agent.Name)
		}
		return metav1.ConditionTrue, agentsv1.ReasonChannelConfigured, fmt.Sprintf("channels.%s is in the engine config", ch.Spec.Type)
	}
	applied := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentConfigApplied)
	if holds(cfg.PendingChannels, ch) && applied != nil && applied.Status == metav1.ConditionFalse && agent.Status.Phase != agentsv1.AgentStarting {
		if applied.Reason == agentsv1.ReasonWaitingForAgent {
			return metav1.ConditionFalse, agentsv1.ReasonChannelAgentNotReady, "the agent's home cannot be reached yet: the channel is rendered once it can"
		}
		return metav1.ConditionFalse, agentsv1.ReasonChannelConfigFailed, controllers.Truncate("the agent's engine config: " + applied.Message)
	}
	return metav1.ConditionUnknown, agentsv1.ReasonChannelRendering, "waiting for agent " + agent.Name + " to render the channel into its engine config"
}

// holds: list has ch at its generation or a later one (as a removal once ch is being
// deleted).
func holds(list []agentsv1.RenderedChannel, ch *agentsv1.Channel) bool {
	removal := ch.DeletionTimestamp != nil
	return slices.ContainsFunc(list, func(rc agentsv1.RenderedChannel) bool {
		return rc.Type == ch.Spec.Type && rc.Name == ch.Name && rc.Generation >= ch.Generation && rc.Removal == removal
	})
}

// waitForGateway leaves the plugin's install until agent's gateway runs: the agent's next phase
// reconciles the channel, else a retry. Configured is Unknown, so a setup request keeps
// waiting for the verdict; why (the last attempt's output) ends the message when there was one.
func waitForGateway(ch *agentsv1.Channel, agent *agentsv1.Agent, why string) (ctrl.Result, error) {
	msg := fmt.Sprintf("installing plugin %s waits for agent %s's gateway to run", controllers.ChannelPlugin(ch.Spec.Type), agent.Name)
	if why != "" {
		msg += " (" + why + ")"
	}
	setConfigured(ch, metav1.ConditionUnknown, agentsv1.ReasonChannelAgentNotReady, controllers.Truncate(msg))
	return ctrl.Result{RequeueAfter: channelNotReadyRetry}, nil
}

// failed records a failed plugin install on the PluginInstalled and Configured conditions
// (an agent that cannot be reached yet is AgentNotReady). Until maxPluginInstallAttempts
// installs failed in a row, or the plugin is rejected, Configured stays Unknown
// (PluginInstallRetrying) and the install is tried again soon; then the failure is the
// channel's verdict, and it is still retried now and then. A new generation of the channel
// counts its tries anew.
func (r *Reconciler) failed(ch *agentsv1.Channel, err error) (ctrl.Result, error) {
	if errors.Is(err, runtime.ErrNotRunning) {
		setConfigured(ch, metav1.ConditionFalse, agentsv1.ReasonChannelAgentNotReady, "the agent's home cannot be reached yet: "+err.Error())
		return ctrl.Result{RequeueAfter: channelNotReadyRetry}, nil
	}
	if c := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelPluginInstalled); c == nil || c.ObservedGeneration != ch.Generation {
		ch.Status.PluginInstallFailures = 0 // a changed channel (a setup asked again) gets its tries anew
	}
	if ch.Status.PluginInstallFailures < maxPluginInstallAttempts {
		ch.Status.PluginInstallFailures++ // beyond the verdict, a count would only rewrite the status each retry
	}
	n := ch.Status.PluginInstallFailures
	meta.SetStatusCondition(&ch.Status.Conditions, metav1.Condition{
		Type: agentsv1.ChannelPluginInstalled, Status: metav1.ConditionFalse, Reason: agentsv1.ReasonPluginInstallFailed,
		Message: controllers.Truncate(err.Error()), ObservedGeneration: ch.Generation,
	})
	plugin := controllers.ChannelPlugin(ch.Spec.Type)
	if n < maxPluginInstallAttempts && !errors.Is(err, engine.ErrPluginRejected) {
		wait := cmp.Or(r.PluginRetry, pluginRetry) << (n - 1)
		setConfigured(ch, metav1.ConditionUnknown, agentsv1.ReasonChannelPluginRetry,
			controllers.Truncate(fmt.Sprintf("installing plugin %s failed (attempt %d of %d), retrying in %s: %v", plugin, n, maxPluginInstallAttempts, wait, err)))
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	setConfigured(ch, metav1.ConditionFalse, agentsv1.ReasonChannelPluginFailed, controllers.Truncate("installing plugin "+plugin+" failed: "+err.Error()))
	return ctrl.Result{RequeueAfter: channelFailureRetry}, nil
}

// orphaned handles a Channel whose agent does not exist or is being deleted: a Channel the
// agent owns is deleted with it (also where no garbage collector runs); another one waits.
func (r *Reconciler) orphaned(ctx context.Context, ch *agentsv1.Channel) (ctrl.Result, error) {
	if owner := metav1.GetControllerOf(ch); owner != nil && owner.Kind == agentsv1.KindAgent && owner.Name == ch.Spec.AgentRef.Name {
		live := &agentsv1.Agent{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: owner.Name}, live)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if err != nil || live.UID != owner.UID || live.DeletionTimestamp != nil {
			setConfigured(ch, metav1.ConditionFalse, agentsv1.ReasonAgentNotFound, fmt.Sprintf("agent %s is gone: the channel goes with it", owner.Name))
			return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, ch, client.Preconditions{UID: &ch.UID}))
		}
	}
	setConfigured(ch, metav1.ConditionFalse, agentsv1.ReasonAgentNotFound, fmt.Sprintf("agent %s does not exist", ch.Spec.AgentRef.Name))
	return ctrl.Result{RequeueAfter: channelWaitRetry}, nil
}

// reconcileDelete waits until the agent rendered the channel out of its engine config (an
// agent that is going too, or whose home cannot be reached, renders nothing now: it removes
// the channel on its next render, which status.config.channels remembers), deletes the token
// Secrets made for it and releases the Channel.
func (r *Reconciler) reconcileDelete(ctx context.Context, ch *agentsv1.Channel) (res ctrl.Result, reterr error) {
	if !controllerutil.ContainsFinalizer(ch, agentsv1.ChannelFinalizer) {
		return ctrl.Result{}, nil
	}
	// While it waits for the agent, the Channel says why in its status.
	before := ch.DeepCopy()
	defer func() { controllers.PatchStatus(ctx, r.Client, ch, before, r.statusStep(ch, before), &res, &reterr) }()
	agent := &agentsv1.Agent{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ch.Spec.AgentRef.Name}, agent)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	applied := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentConfigApplied)
	unreachable := applied != nil && applied.Status == metav1.ConditionFalse && applied.Reason == agentsv1.ReasonWaitingForAgent
	if err == nil && agent.DeletionTimestamp == nil && !unreachable && stillRendered(agent, ch) {
		setConfigured(ch, metav1.ConditionUnknown, agentsv1.ReasonChannelRendering, "waiting for agent "+agent.Name+" to render the channel out of its engine config")
		if applied != nil && applied.Status == metav1.ConditionFalse && agent.Status.Config != nil && holds(agent.Status.Config.PendingChannels, ch) {
			setConfigured(ch, metav1.ConditionFalse, agentsv1.ReasonChannelRemovalFailed, controllers.Truncate("the agent's engine config: "+applied.Message))
		}
		return ctrl.Result{RequeueAfter: channelFailureRetry}, nil
	}
	if err := r.deleteTokenSecrets(ctx, ch); err != nil {
		return ctrl.Result{}, err
	}
	r.event(ch, corev1.EventTypeNormal, "Removed", "Delete", "channel %s removed from agent %s", ch.Spec.Type, ch.Spec.AgentRef.Name)
	controllerutil.RemoveFinalizer(ch, agentsv1.ChannelFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, ch))
}

// installedLive: the stored Channel (read live: a pass on a cache that has not seen the
// last status write must not install the plugin a second time, a minute of npm) records its
// plugin as installed for its current plugin. A failed install is retried.
func (r *Reconciler) installedLive(ctx context.Context, ch *agentsv1.Channel) (bool, error) {
	live := &agentsv1.Channel{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ch), live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !meta.IsStatusConditionTrue(live.Status.Conditions, agentsv1.ChannelPluginInstalled) {
		return false, nil
	}
	meta.SetStatusCondition(&ch.Status.Conditions, *meta.FindStatusCondition(live.Status.Conditions, agentsv1.ChannelPluginInstalled))
	return true, nil
}

// stillRendered: the agent's engine config holds ch (by name: a duplicate never was).
func stillRendered(agent *agentsv1.Agent, ch *agentsv1.Channel) bool {
	if agent.Status.Config == nil {
		return false
	}
	return slices.ContainsFunc(agent.Status.Config.Channels, func(rc agentsv1.RenderedChannel) bool { return rc.Name == ch.Name })
}

// deleteTokenSecrets deletes the Secrets the Channel references that were made for it
// (labelled agentsv1.LabelChannelTokensOf = the Channel's name).
func (r *Reconciler) deleteTokenSecrets(ctx context.Context, ch *agentsv1.Channel) error {
	for _, ref := range []*agentsv1.SecretKeyReference{ch.Spec.BotTokenRef, ch.Spec.AppTokenRef} {
		if ref == nil {
			continue
		}
		sec := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ref.Name}, sec)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if sec.Labels[agentsv1.LabelChannelTokensOf] != ch.Name {
			continue
		}
		if err := r.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// readHints sets the token hints from the referenced Secrets and names a token the channel
// type needs that is missing ("" when all are there).
func (r *Reconciler) readHints(ctx context.Context, ch *agentsv1.Channel) (string, error) {
	botEnv, appEnv := controllers.ChannelTokenEnv(ch.Spec.Type)
	ch.Status.BotTokenHint, ch.Status.AppTokenHint = "", ""
	for _, tok := range []struct {
		needed bool
		ref    *agentsv1.SecretKeyReference
		hint   *string
		what   string
	}{
		{botEnv != "", ch.Spec.BotTokenRef, &ch.Status.BotTokenHint, "bot token"},
		{appEnv != "", ch.Spec.AppTokenRef, &ch.Status.AppTokenHint, "app token"},
	} {
		if tok.ref == nil {
			if tok.needed {
				return "the channel references no " + tok.what, nil
			}
			continue
		}
		v, err := channels.ReadSecretKey(ctx, r.APIReader, ch.Namespace, tok.ref)
		if err != nil {
			return "", err
		}
		if v == "" {
			if tok.needed {
				return fmt.Sprintf("the %s (secret %s, key %s) is missing", tok.what, tok.ref.Name, tok.ref.Key), nil
			}
			continue
		}
		*tok.hint = auth.Hint(v)
	}
	return "", nil
}

// olderSibling names an older Channel (not being deleted) of the same agent and type: that
// one owns the config entry and this one is a duplicate. "" when there is none.
func (r *Reconciler) olderSibling(ctx context.Context, ch *agentsv1.Channel) (string, error) {
	var list agentsv1.ChannelList
	if err := r.List(ctx, &list, client.InNamespace(ch.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: ch.Spec.AgentRef.Name}); err != nil {
		return "", err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID != ch.UID && o.DeletionTimestamp == nil && o.Spec.Type == ch.Spec.Type && o.OlderThan(ch) {
			return o.Name, nil
		}
	}
	return "", nil
}

// setConfigured sets the Configured condition and status.configured. An agent that cannot be
// reached, or a render not done yet, keeps status.configured as it was (the config is
// unchanged).
func setConfigured(ch *agentsv1.Channel, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&ch.Status.Conditions, metav1.Condition{
		Type: agentsv1.ChannelConfigured, Status: status, Reason: reason, Message: msg, ObservedGeneration: ch.Generation,
	})
	if reason != agentsv1.ReasonChannelAgentNotReady && status != metav1.ConditionUnknown {
		ch.Status.Configured = status == metav1.ConditionTrue
	}
}

// statusStep, of reconcileNormal's and reconcileDelete's pass, sets the Ready condition and
// writes the status when it changed (recording Configured changes as events); a released
// Channel has none to write. Only a pass that reached a verdict (ended without error)
// acknowledges the generation. This controller alone writes a Channel's status: a plain
// merge patch.
func (r *Reconciler) statusStep(ch, before *agentsv1.Channel) controllers.StatusStep {
	return controllers.StatusStep{
		Compute: func(passOK bool) bool {
			if ch.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(ch, agentsv1.ChannelFinalizer) {
				return false // removed: the Channel is gone with its status
			}
			if passOK {
				ch.Status.ObservedGeneration = ch.Generation
			}
			meta.SetStatusCondition(&ch.Status.Conditions, computeChannelReadyCondition(ch))
			return true
		},
		Written: func(changed bool) {
			if changed {
				r.announceConfigured(ch, before)
			}
		},
		Options: []controllers.StatusPatchOption{controllers.WithoutLock},
	}
}

// announceConfigured records a change of the Configured condition as an event.
func (r *Reconciler) announceConfigured(ch, before *agentsv1.Channel) {
	old := meta.FindStatusCondition(before.Status.Conditions, agentsv1.ChannelConfigured)
	cur := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelConfigured)
	if cur != nil && cur.Status != metav1.ConditionUnknown && (old == nil || old.Status != cur.Status || old.Reason != cur.Reason) {
		typ := corev1.EventTypeNormal
		if cur.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		r.event(ch, typ, cur.Reason, "Reconcile", "%s", cur.Message)
	}
}

func (r *Reconciler) event(ch *agentsv1.Channel, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ch, nil, typ, reason, action, note, args...)
	}
}

// lockAgent serializes plugin installs into one agent's home; it returns the unlock.
func (r *Reconciler) lockAgent(key types.NamespacedName) func() {
	m, _ := r.locks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// SetupWithManager registers the controller: Channels, the agents they belong to (an agent
// that changes phase, renders its config or goes away re-runs its channels) and the token
// Secrets made for them (a new token updates the hints).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Engine == nil || r.Runtime == nil {
		return errors.New("the Channel controller needs an engine and a runtime")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.Channel{}, builder.WithPredicates(controllers.ChannelChanged())).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(controllers.ChannelsOfAgent(r.Client)), builder.WithPredicates(agentRenderChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(tokensToChannel)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("channel").
		Complete(r)
}

// tokensToChannel maps a token Secret made for a Channel (agentsv1.LabelChannelTokensOf) to it.
func tokensToChannel(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[agentsv1.LabelChannelTokensOf]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// agentRenderChanged passes agent creations, deletions, phase changes, deletion starts and
// renders of the engine config (status.config, the ConfigApplied condition).
func agentRenderChanged() predicate.Predicate {
	return watchfilter.Updates(func(o, n *agentsv1.Agent) bool {
		return o.Status.Phase != n.Status.Phase || watchfilter.DeletionStarted(o, n) ||
			!equality.Semantic.DeepEqual(o.Status.Config, n.Status.Config) ||
			watchfilter.ConditionChanged(o.Status.Conditions, n.Status.Conditions, agentsv1.AgentConfigApplied)
	})
}
