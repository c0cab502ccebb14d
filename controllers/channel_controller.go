package controllers

import (
	"context"
	"errors"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/engine"
	"github.com/agentplane/agentplane/internal/runtime"
)

// Requeue intervals of the Channel controller.
const (
	// channelResync re-checks that the engine config still carries a configured channel.
	channelResync = 10 * time.Minute
	// channelNotReadyRetry re-tries a channel whose agent cannot be reached yet (its phase
	// changes also trigger a pass).
	channelNotReadyRetry = 15 * time.Second
	// channelFailureRetry re-tries a failed config write, removal or plugin install.
	channelFailureRetry = 30 * time.Second
	// channelWaitRetry re-checks a channel waiting for its tokens or its agent.
	channelWaitRetry = time.Minute
)

// ChannelReconciler writes each Channel into its agent's engine config through the runtime
// (the gateway hot-reloads channels) and installs the channel's engine plugin. Tokens never
// enter the config: it names environment variables that SecretEnv fills from the Channel's
// token Secrets.
type ChannelReconciler struct {
	client.Client
	// APIReader reads live (token Secrets are not cached; agents confirmed gone).
	APIReader client.Reader
	Runtime   runtime.Runtime
	Engine    engine.Engine
	Recorder  events.EventRecorder
	// PluginTimeout bounds one plugin install (default 5 minutes).
	PluginTimeout time.Duration

	// locks serialize the read-modify-write of one agent's config by several channels.
	locks sync.Map
}

// +kubebuilder:rbac:groups=agentplane.io,resources=channels,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=agentplane.io,resources=channels/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=channels/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;delete

// Reconcile converges one Channel: a normal and a delete path; the status is written only
// when it changed, then the facade's request (if any) is acknowledged.
func (r *ChannelReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ch := &agentsv1.Channel{}
	if err := r.Get(ctx, req.NamespacedName, ch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := ch.Status.DeepCopy()
	var res ctrl.Result
	var err error
	if ch.DeletionTimestamp != nil {
		var gone bool
		if res, gone, err = r.reconcileDelete(ctx, ch); gone {
			return res, err
		}
	} else {
		if controllerutil.AddFinalizer(ch, agentsv1.ChannelFinalizer) {
			if err := r.Update(ctx, ch); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		}
		res, err = r.reconcileNormal(ctx, ch)
	}
	// A pass that ended in an error has no verdict: the request stays unacknowledged.
	if ferr := r.finish(ctx, ch, before, err == nil); ferr != nil && err == nil {
		err = ferr
	}
	return res, err
}

// reconcileNormal installs the plugin and writes the channel into the agent's config.
func (r *ChannelReconciler) reconcileNormal(ctx context.Context, ch *agentsv1.Channel) (ctrl.Result, error) {
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
		setConfigured(ch, false, agentsv1.ReasonChannelDuplicate,
			fmt.Sprintf("channel %s already connects agent %s to %s", dup, agent.Name, ch.Spec.Type))
		return ctrl.Result{}, nil
	}
	if missing, err := r.readHints(ctx, ch); err != nil {
		return ctrl.Result{}, err
	} else if missing != "" {
		setConfigured(ch, false, agentsv1.ReasonChannelTokenNotFound, missing)
		return ctrl.Result{RequeueAfter: channelWaitRetry}, nil
	}

	unlock := r.lockAgent(client.ObjectKeyFromObject(agent))
	defer unlock()
	if pluginOf(ch.Spec.Type) != "" && !meta.IsStatusConditionTrue(ch.Status.Conditions, agentsv1.ChannelPluginInstalled) {
		if err := r.installPlugin(ctx, agent, ch.Spec.Type); err != nil {
			return r.failed(ch, err, agentsv1.ReasonChannelPluginFailed, "installing plugin "+pluginOf(ch.Spec.Type)+" failed: ")
		}
		meta.SetStatusCondition(&ch.Status.Conditions, metav1.Condition{
			Type: agentsv1.ChannelPluginInstalled, Status: metav1.ConditionTrue, Reason: agentsv1.ReasonPluginInstalled,
			Message: pluginOf(ch.Spec.Type) + " is installed", ObservedGeneration: ch.Generation,
		})
	}
	if _, err := r.applyConfig(ctx, agent, ch); err != nil {
		return r.failed(ch, err, agentsv1.ReasonChannelConfigFailed, "writing the engine config failed: ")
	}
	setConfigured(ch, true, agentsv1.ReasonChannelConfigured, fmt.Sprintf("channels.%s is in the engine config", ch.Spec.Type))
	return ctrl.Result{RequeueAfter: channelResync}, nil
}

// failed records err on the Configured condition: an agent that cannot be reached yet is
// AgentNotReady, anything else reason (with prefix before the error). It retries later.
func (r *ChannelReconciler) failed(ch *agentsv1.Channel, err error, reason, prefix string) (ctrl.Result, error) {
	if errors.Is(err, runtime.ErrNotRunning) {
		setConfigured(ch, false, agentsv1.ReasonChannelAgentNotReady, "the agent's home cannot be reached yet: "+err.Error())
		return ctrl.Result{RequeueAfter: channelNotReadyRetry}, nil
	}
	if reason == agentsv1.ReasonChannelPluginFailed {
		meta.SetStatusCondition(&ch.Status.Conditions, metav1.Condition{
			Type: agentsv1.ChannelPluginInstalled, Status: metav1.ConditionFalse, Reason: agentsv1.ReasonPluginInstallFailed,
			Message: truncate(err.Error()), ObservedGeneration: ch.Generation,
		})
	}
	setConfigured(ch, false, reason, truncate(prefix+err.Error()))
	return ctrl.Result{RequeueAfter: channelFailureRetry}, nil
}

// orphaned handles a Channel whose agent does not exist or is being deleted: a Channel the
// agent owns is deleted with it (also where no garbage collector runs); another one waits.
func (r *ChannelReconciler) orphaned(ctx context.Context, ch *agentsv1.Channel) (ctrl.Result, error) {
	if owner := metav1.GetControllerOf(ch); owner != nil && owner.Kind == "Agent" && owner.Name == ch.Spec.AgentRef.Name {
		live := &agentsv1.Agent{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: owner.Name}, live)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if err != nil || live.UID != owner.UID || live.DeletionTimestamp != nil {
			setConfigured(ch, false, agentsv1.ReasonAgentNotFound, fmt.Sprintf("agent %s is gone: the channel goes with it", owner.Name))
			return ctrl.Result{}, client.IgnoreNotFound(r.Delete(ctx, ch, client.Preconditions{UID: &ch.UID}))
		}
	}
	setConfigured(ch, false, agentsv1.ReasonAgentNotFound, fmt.Sprintf("agent %s does not exist", ch.Spec.AgentRef.Name))
	return ctrl.Result{RequeueAfter: channelWaitRetry}, nil
}

// reconcileDelete removes the channel from the agent's config (unless the agent is going
// too, or an older Channel of the type owns the config entry), deletes the token Secrets made
// for it and releases the Channel. gone reports that the Channel was released.
func (r *ChannelReconciler) reconcileDelete(ctx context.Context, ch *agentsv1.Channel) (ctrl.Result, bool, error) {
	if !controllerutil.ContainsFinalizer(ch, agentsv1.ChannelFinalizer) {
		return ctrl.Result{}, true, nil
	}
	agent := &agentsv1.Agent{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ch.Namespace, Name: ch.Spec.AgentRef.Name}, agent)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, false, err
	}
	if err == nil && agent.DeletionTimestamp == nil {
		dup, err := r.olderSibling(ctx, ch)
		if err != nil {
			return ctrl.Result{}, false, err
		}
		if dup == "" {
			unlock := r.lockAgent(client.ObjectKeyFromObject(agent))
			err := r.removeConfig(ctx, agent, ch.Spec.Type)
			unlock()
			if err != nil {
				setConfigured(ch, false, agentsv1.ReasonChannelRemovalFailed, truncate("removing the channel from the engine config failed: "+err.Error()))
				return ctrl.Result{RequeueAfter: channelFailureRetry}, false, nil
			}
		}
	}
	if err := r.deleteTokenSecrets(ctx, ch); err != nil {
		return ctrl.Result{}, false, err
	}
	r.event(ch, corev1.EventTypeNormal, "Removed", "Delete", "channel %s removed from agent %s", ch.Spec.Type, ch.Spec.AgentRef.Name)
	controllerutil.RemoveFinalizer(ch, agentsv1.ChannelFinalizer)
	return ctrl.Result{}, true, client.IgnoreNotFound(r.Update(ctx, ch))
}

// deleteTokenSecrets deletes the Secrets the Channel references that were made for it
// (labelled agentsv1.LabelChannelTokensOf = the Channel's name).
func (r *ChannelReconciler) deleteTokenSecrets(ctx context.Context, ch *agentsv1.Channel) error {
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
func (r *ChannelReconciler) readHints(ctx context.Context, ch *agentsv1.Channel) (string, error) {
	botEnv, appEnv := ChannelTokenEnv(ch.Spec.Type)
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
		v, err := readSecretKey(ctx, r.APIReader, ch.Namespace, tok.ref)
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
func (r *ChannelReconciler) olderSibling(ctx context.Context, ch *agentsv1.Channel) (string, error) {
	var list agentsv1.ChannelList
	if err := r.List(ctx, &list, client.InNamespace(ch.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: ch.Spec.AgentRef.Name}); err != nil {
		return "", err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID != ch.UID && o.DeletionTimestamp == nil && o.Spec.Type == ch.Spec.Type && olderChannel(o, ch) {
			return o.Name, nil
		}
	}
	return "", nil
}

// setConfigured sets the Configured condition and status.configured. An agent that cannot be
// reached keeps status.configured as it was (the config is unchanged).
func setConfigured(ch *agentsv1.Channel, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&ch.Status.Conditions, metav1.Condition{
		Type: agentsv1.ChannelConfigured, Status: status, Reason: reason, Message: msg, ObservedGeneration: ch.Generation,
	})
	if reason != agentsv1.ReasonChannelAgentNotReady {
		ch.Status.Configured = ok
	}
}

// finish sets the Ready condition, writes the status when it changed (recording Configured
// changes as events), then, with ack (the pass reached a verdict), acknowledges the facade's
// request: the status now holds the verdict on it.
func (r *ChannelReconciler) finish(ctx context.Context, ch *agentsv1.Channel, before *agentsv1.ChannelStatus, ack bool) error {
	if ack {
		// Only a pass that reached a verdict acknowledges the generation.
		ch.Status.ObservedGeneration = ch.Generation
	}
	meta.SetStatusCondition(&ch.Status.Conditions, computeChannelReadyCondition(ch))
	if !equality.Semantic.DeepEqual(before, &ch.Status) {
		orig := ch.DeepCopy()
		orig.Status = *before
		if err := r.Status().Patch(ctx, ch, client.MergeFrom(orig)); err != nil {
			return client.IgnoreNotFound(err)
		}
		old := meta.FindStatusCondition(before.Conditions, agentsv1.ChannelConfigured)
		cur := meta.FindStatusCondition(ch.Status.Conditions, agentsv1.ChannelConfigured)
		if cur != nil && (old == nil || old.Status != cur.Status || old.Reason != cur.Reason) {
			typ := corev1.EventTypeNormal
			if cur.Status != metav1.ConditionTrue {
				typ = corev1.EventTypeWarning
			}
			r.event(ch, typ, cur.Reason, "Reconcile", "%s", cur.Message)
		}
	}
	want := ch.Annotations[agentsv1.AnnotationChannelRequest]
	if !ack || want == "" || ch.Annotations[agentsv1.AnnotationChannelHandled] == want {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, agentsv1.AnnotationChannelHandled, want)
	return client.IgnoreNotFound(r.Patch(ctx, ch, client.RawPatch(types.MergePatchType, patch)))
}

func (r *ChannelReconciler) event(ch *agentsv1.Channel, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ch, nil, typ, reason, action, note, args...)
	}
}

// lockAgent serializes config edits of one agent; it returns the unlock.
func (r *ChannelReconciler) lockAgent(key types.NamespacedName) func() {
	m, _ := r.locks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// SetupWithManager registers the controller: Channels, and the agents they belong to (an
// agent that starts, changes phase or goes away re-runs its channels).
func (r *ChannelReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.Channel{}, builder.WithPredicates(channelChanged())).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(agentRefMapper[agentsv1.ChannelList](r.Client)), builder.WithPredicates(agentPhaseChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("channel").
		Complete(r)
}

// agentPhaseChanged passes agent creations, deletions, phase changes, deletion starts and
// config writes through the REST facade (agentsv1.AnnotationConfigWritten).
func agentPhaseChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*agentsv1.Agent)
			n, ok2 := e.ObjectNew.(*agentsv1.Agent)
			if !ok1 || !ok2 {
				return true
			}
			return o.Status.Phase != n.Status.Phase || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
				o.Annotations[agentsv1.AnnotationConfigWritten] != n.Annotations[agentsv1.AnnotationConfigWritten]
		},
	}
}
