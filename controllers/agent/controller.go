// Package agent is the Agent controller: it keeps each agent's gateway in the runtime with
// its environment, engine config and skills, puts idle agents to sleep and wakes them, carries
// out restores from snapshots, and reports the agent's status.
package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// Requeue intervals.
const (
	// startingPoll re-checks a booting gateway. Runtimes report changes themselves (pod watches,
	// local health notifications); this is only the safety net, kept long so that many
	// starting agents do not add up to a steady load on the API server.
	startingPoll = 30 * time.Second
	// limitRetry re-checks an agent that waits for a free slot of the workspace's limit.
	limitRetry = time.Minute
	// configRetry re-tries a render of the engine config that could not be done (a home that
	// cannot be reached, a file that cannot be read).
	configRetry = 5 * time.Second
)

// EnvResolver gathers the environment an agent's attached secrets (and channels) give it.
// It returns the variables and the name of the core Secret that holds them (for runtimes that
// reference rather than copy them).
type EnvResolver interface {
	Resolve(ctx context.Context, agent *agentsv1.Agent) (env map[string]string, secretName string, err error)
}

// Reconciler runs each Agent's gateway on the configured runtime and reports its state.
type Reconciler struct {
	client.Client
	Runtime runtime.Runtime
	// Admission takes the agent's slot of the workspace limit, resolves its engine version
	// and expands spec.template, by the rules the REST facade applies too.
	Admission *admission.Admitter
	Recorder  events.EventRecorder
	// Env resolves attached secrets into environment; nil means none.
	Env EnvResolver
	// Snapshots holds snapshot archives (spec.desiredSnapshot restores; nil: none configured);
	// SnapshotReader reads Snapshots and templates for it (live; nil: the cached Client).
	Snapshots      storage.Store
	SnapshotReader client.Reader
	// Skills holds skill bundles and Engine names the engine's files: attached skills are
	// unpacked into the home (nil: they are not).
	Skills storage.Store
	Engine engine.Engine
	// APIReader reads what the cache does not hold (a config Secret of the user's, applied
	// with kubectl without the platform's label; nil: the cached Client).
	APIReader client.Reader
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
	// Workers is how many agents reconcile at once (default 4).
	Workers int
	// Sleep tunes suspension: the lead of a wake before a scheduled task, the wake window.
	Sleep SleepOptions
	// ModelProxy routes the keys of model providers it knows through the platform's model
	// proxy (nil: every attached secret reaches the agent's environment).
	ModelProxy ModelProxy
	// ChannelRelay relays the channels it serves (nil: their tokens reach the agent's
	// environment).
	ChannelRelay ChannelRelay

	written writtenStatus
	// rendered holds the inputs hash of each agent's last config render and unpacked the
	// skills in its workspace, as this process left them (see homeRecord).
	rendered homeRecord[string]
	unpacked homeRecord[[]string]
	// sendHolds holds when each agent's suspend began to wait for its sends (holdSuspend).
	sendHolds homeRecord[time.Time]
	// slept holds the sleep of each agent whose gateway this process's last pass put to sleep
	// (recallSleep).
	slept homeRecord[sleepRecord]
}

// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents/finalizers,verbs=update
// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile converges one Agent: cluster-api style, a normal and a delete path, and the status
// computed in one place and written only when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	agent := &agentsv1.Agent{}
	if err := r.Get(ctx, req.NamespacedName, agent); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if agent.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, agent)
	}
	if controllerutil.AddFinalizer(agent, agentsv1.AgentFinalizer) {
		if err := r.Update(ctx, agent); err != nil {
			return ctrl.Result{}, err
		}
	}

	before := agent.DeepCopy()
	defer func() {
		controllers.PatchStatus(ctx, r.Client, agent, before, r.statusStep(ctx, agent, before), &res, &reterr)
	}()
	return r.reconcileNormal(ctx, agent)
}

// reconcileNormal admits the agent (template, slot of the workspace's limit, engine version),
// makes sure the gateway token exists, asks the runtime for the desired state and records
// what it observes.
func (r *Reconciler) reconcileNormal(ctx context.Context, agent *agentsv1.Agent) (ctrl.Result, error) {
	version, res, err := r.admit(ctx, agent)
	if err != nil || !res.IsZero() || version == "" {
		return res, err
	}
	// The environment is resolved first: only an agent that needs none can take a warm
	// gateway, so only such an agent has one reserved (runtime.GatewayReserver).
	desired, derr := r.desired(ctx, agent, version)
	token, secretName, err := r.ensureGatewayToken(ctx, agent, version, derr == nil && len(desired.Env) == 0)
	if err != nil {
		return ctrl.Result{}, err
	}
	if derr != nil {
		setProvisionFailure(agent, agentsv1.ReasonProvisionFailed, derr.Error(), r.Clock.Now())
		return ctrl.Result{}, derr
	}
	desired.GatewayToken, desired.GatewayTokenSecret = token, secretName
	desired.AllowedRendering = agent.Annotations[agentsv1.AnnotationAllowedRendering]
	var asleep bool
	var wakeIn time.Duration
	if agent.Spec.Stopped {
		meta.RemoveStatusCondition(&agent.Status.Conditions, agentsv1.ConditionSuspended)
	} else if asleep, wakeIn, err = r.reconcileSleep(ctx, agent); err != nil {
		return ctrl.Result{}, err
	}
	var hold time.Duration
	if asleep && !agent.Spec.Stopped {
		var held bool
		if held, hold = r.holdSuspend(agent); held {
			asleep = false // this pass: the gateway keeps running until its send is answered
		}
	}
	desired.Stopped = desired.Stopped || asleep
	desired.Suspended = asleep && !agent.Spec.Stopped
	observed, err := r.Runtime.Ensure(ctx, agent, desired)
	if err != nil {
		setProvisionFailure(agent, agentsv1.ReasonProvisionFailed, err.Error(), r.Clock.Now())
		return ctrl.Result{}, err
	}
	agent.Status.GatewayTokenSecret = secretName
	if observed.ClaimedFrom != "" {
		r.event(agent, corev1.EventTypeNormal, "Claimed", "Claim", "took the warm gateway %s and bound the agent to it", observed.ClaimedFrom)
	}
	applyObserved(agent, observed, r.Clock.Now())
	r.rememberSleep(agent, asleep, observed)
	res, err = r.reconcileWorkspaceState(ctx, agent, desired, observed)
	return soonest(soonest(res, wakeIn), hold), err
}

// reconcileWorkspaceState brings the agent's home in line with its spec: a snapshot to
// restore, skills to unpack, the engine config to render.
func (r *Reconciler) reconcileWorkspaceState(ctx context.Context, agent *agentsv1.Agent, desired runtime.Desired, observed runtime.Observed) (ctrl.Result, error) {
	if res, err := r.restoreSnapshot(ctx, agent); err != nil || !res.IsZero() {
		return res, err
	}
	if err := r.syncSkills(ctx, agent); err != nil {
		return ctrl.Result{}, err
	}
	if after, err := r.syncConfig(ctx, agent, desired.Env, desired.GatewayToken); err != nil || after > 0 {
		return ctrl.Result{RequeueAfter: after}, err
	}
	if observed.Phase == runtime.PhaseStarting {
		return ctrl.Result{RequeueAfter: startingPoll}, nil
	}
	return ctrl.Result{}, nil
}

// soonest adds a timer (0: none) to a result: the earlier requeue wins.
func soonest(res ctrl.Result, after time.Duration) ctrl.Result {
	if after > 0 && (res.RequeueAfter == 0 || after < res.RequeueAfter) {
		res.RequeueAfter = after
	}
	return res
}

// admit applies the admission rules the REST facade applies before it creates an agent: an
// Agent applied with kubectl that names a template gets it expanded into its spec (written
// once, recorded by an annotation), then takes its slot of the workspace's limit and
// resolves its engine version. It returns the version to run, or "" with the provision
// failure recorded.
func (r *Reconciler) admit(ctx context.Context, agent *agentsv1.Agent) (string, ctrl.Result, error) {
	if admission.NeedsExpansion(agent) {
		if err := r.Admission.ExpandNamed(ctx, agent); err != nil {
			if errors.Is(err, admission.ErrTemplateNotFound) {
				setProvisionFailure(agent, agentsv1.ReasonTemplateNotFound, fmt.Sprintf("template %q is not a published AgentTemplate", agent.Spec.Template), r.Clock.Now())
				return "", ctrl.Result{RequeueAfter: limitRetry}, nil
			}
			return "", ctrl.Result{}, err
		}
		if err := r.Update(ctx, agent); apierrors.IsInvalid(err) {
			// The template fills in what the API server refuses: nothing to retry until a change.
			setProvisionFailure(agent, agentsv1.ReasonProvisionFailed, fmt.Sprintf("template %q: %v", agent.Spec.Template, err), r.Clock.Now())
			return "", ctrl.Result{}, nil
		} else if err != nil {
			return "", ctrl.Result{}, err
		}
	}
	if err := r.Admission.ReserveAgent(ctx, agent); err != nil {
		if errors.Is(err, admission.ErrLimitReached) {
			setProvisionFailure(agent, agentsv1.ReasonAgentLimitReached, "the workspace's agent limit is reached", r.Clock.Now())
			return "", ctrl.Result{RequeueAfter: limitRetry}, nil
		}
		return "", ctrl.Result{}, err
	}
	// Bound to its slot: written with this pass's status, after which the Workspace
	// controller counts the slot as used and this agent never asks for it again.
	agent.Status.HoldsSlot = true
	version, err := r.Admission.Version(agent)
	if errors.Is(err, admission.ErrInvalidVersion) {
		setProvisionFailure(agent, agentsv1.ReasonInvalidVersion, fmt.Sprintf("engine version %q is not offered", version), r.Clock.Now())
		return "", ctrl.Result{}, nil
	}
	return version, ctrl.Result{}, err
}

// desired is what the runtime should run for agent, but for the gateway token.
func (r *Reconciler) desired(ctx context.Context, agent *agentsv1.Agent, version string) (runtime.Desired, error) {
	d := runtime.Desired{
		EngineVersion: version,
		Stopped:       agent.Spec.Stopped,
		Identity:      engine.IdentityOf(agent),
	}
	if t := agent.Spec.RestartRequestedAt; t != nil {
		d.RestartNonce = t.UTC().Format(time.RFC3339Nano)
	}
	if r.Env != nil {
		env, secretName, err := r.Env.Resolve(ctx, agent)
		if err != nil {
			return d, fmt.Errorf("resolve secrets: %w", err)
		}
		d.Env, d.EnvSecret = env, secretName
	}
	var err error
	if d.RuntimeClassName, err = r.runtimeClassName(ctx, agent); err != nil {
		return d, fmt.Errorf("runtime class: %w", err)
	}
	if d.Egress, err = r.egressNames(ctx, agent); err != nil {
		return d, fmt.Errorf("egress: %w", err)
	}
	return d, nil
}

// reconcileDelete stops the runtime, releases the agent's slot and lets the Agent go.
func (r *Reconciler) reconcileDelete(ctx context.Context, agent *agentsv1.Agent) error {
	if !controllerutil.ContainsFinalizer(agent, agentsv1.AgentFinalizer) {
		return nil
	}
	if err := r.Runtime.Delete(ctx, agent); err != nil {
		return fmt.Errorf("stop runtime: %w", err)
	}
	if err := r.Admission.ReleaseAgent(ctx, agent); err != nil {
		return err
	}
	r.written.forget(agent.UID)
	r.rendered.forget(agent.UID)
	r.unpacked.forget(agent.UID)
	r.slept.forget(agent.UID)
	r.event(agent, corev1.EventTypeNormal, "Deleted", "Delete", "gateway stopped and state removed")
	controllerutil.RemoveFinalizer(agent, agentsv1.AgentFinalizer)
	return client.IgnoreNotFound(r.Update(ctx, agent))
}

// statusStep computes the Ready summary, moves status.observedGeneration when the pass
// converged (it ended without error and no restore waits for a retry), writes the status
// only when it changed (so a quiet pass does not trigger another) and records phase changes
// as events. The write keeps the optimistic lock: a merge patch replaces whole lists, and a
// pass that read a cache older than the stored object (a spec change, another writer's
// status fields) must not put its stale lists back: it conflicts and runs again on fresh data.
func (r *Reconciler) statusStep(ctx context.Context, agent, before *agentsv1.Agent) controllers.StatusStep {
	var sum [sha256.Size]byte
	var now time.Time
	var base string
	return controllers.StatusStep{
		Compute: func(passOK bool) bool {
			if passOK && !restoreRetrying(agent) {
				agent.Status.ObservedGeneration = agent.Generation
			}
			meta.SetStatusCondition(&agent.Status.Conditions, computeReadyCondition(agent))
			if equality.Semantic.DeepEqual(agent.Status, before.Status) {
				return false // a quiet pass: no digest to compute, nothing to write
			}
			sum, now, base = statusSum(&agent.Status), r.Clock.Now(), agent.ResourceVersion
			// Written by a pass that saw this object: the cache has not caught up.
			return !r.written.fresh(agent.UID, base, sum)
		},
		Written: func(changed bool) {
			if changed {
				r.written.store(agent.UID, sum, before.ResourceVersion, base)
				observeFirstRunning(agent, before, now)
				r.announcePhase(ctx, agent, before)
				r.announceCrash(agent, before)
			}
		},
	}
}

// announcePhase records a phase change as an event.
func (r *Reconciler) announcePhase(ctx context.Context, agent, before *agentsv1.Agent) {
	// A phase change is an event, except an agent's first phase (starting): its creation says
	// as much, and at thousands of agents that event would be a request each.
	if before.Status.Phase != agent.Status.Phase && !(before.Status.Phase == "" && agent.Status.Phase == agentsv1.AgentStarting) {
		typ := corev1.EventTypeNormal
		if agent.Status.Phase == agentsv1.AgentNotRunning {
			typ = corev1.EventTypeWarning
		}
		r.event(agent, typ, "Phase"+phaseEventSuffix(agent.Status.Phase), "Reconcile", "agent is %s: %s", agent.Status.Phase, gatewayMessage(agent))
		log.FromContext(ctx).Info("agent phase changed", "from", before.Status.Phase, "to", agent.Status.Phase)
	}
}

// announceCrash records the gateway's crashes seen since the last status as a Warning event
// (the fleet view counts an agent's warnings of the last hour as its errors).
func (r *Reconciler) announceCrash(agent, before *agentsv1.Agent) {
	if n := agent.Status.Restarts - before.Status.Restarts; n > 0 {
		r.event(agent, corev1.EventTypeWarning, agentsv1.EventGatewayCrashed, "Reconcile",
			"the gateway exited and was restarted (%d crash(es), %d in all): %s", n, agent.Status.Restarts, gatewayMessage(agent))
	}
}

func (r *Reconciler) event(agent *agentsv1.Agent, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(agent, nil, typ, reason, action, note, args...)
	}
}

// SetupWithManager registers the controller: Agents, their gateway-token Secrets, their
// Channels, and what the runtime watches (runtime.Watcher).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// The controller's own status writes (and others' reservations) need no pass.
		For(&agentsv1.Agent{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Owns(&corev1.Secret{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers()}).
		Named("agent")
	// The agent's environment carries its channels' tokens, and its config their settings.
	b = WatchChannels(b)
	b = r.watchIdlePolicy(b)
	if w, ok := r.Runtime.(runtime.Watcher); ok {
		b = w.SetupWatches(b)
	}
	return b.Complete(r)
}

// workers is how many agents reconcile at once (Workers, default 4).
func (r *Reconciler) workers() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return 4
}
