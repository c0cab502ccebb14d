// Package renderingrollout is the RenderingRollout controller: it moves agents' gateways to
// the manager's rendering in waves, with the machinery of the EngineUpgrade controller
// (controllers.Rollout).
package renderingrollout

import (
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
)

// Reconciler rolls RenderingRollouts out with the rollout machinery of EngineUpgrades
// (controllers.Rollout): the same waves, snapshots, health deadlines and halts, towards
// renderingGoal. A RenderingRollout stands in for an EngineUpgrade of its spec (asUpgrade)
// during a pass.
//
// When it starts leading, it makes the RenderingRollout of the manager's rendering (named
// RenderingRolloutName) unless it exists, and deletes those of other renderings (an
// earlier manager's: their agents' gateways can no longer move to them).
type Reconciler struct {
	client.Client
	// Platform is the manager's rendering of the gateways (runtime.PlatformRenderer).
	Platform string
	Recorder events.EventRecorder
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=agentplane.io,resources=renderingrollouts,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=agentplane.io,resources=renderingrollouts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=snapshots,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// RenderingRolloutName is the name of the RenderingRollout the manager makes for its
// rendering.
func RenderingRolloutName(platform string) string { return "rendering-" + platform }

// Reconcile advances one RenderingRollout of the manager's rendering (others are left
// alone), in the form of every reconciler here (controllers/doc.go). A RenderingRollout
// holds no finalizer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	rr := &agentsv1.RenderingRollout{}
	if err := r.Get(ctx, req.NamespacedName, rr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rr.Spec.Rendering != r.Platform {
		return ctrl.Result{}, nil
	}
	before := rr.DeepCopy()
	pass := &rolloutPass{}
	defer func() { controllers.PatchStatus(ctx, r.Client, rr, before, statusStep(pass), &res, &reterr) }()
	return r.reconcileNormal(ctx, rr, before, pass)
}

// rolloutPass is what the status step needs of a pass: stale, a write conflicted (a stale
// cache: the pass runs again on fresh data, soon).
type rolloutPass struct{ stale bool }

// reconcileNormal loads the rollout's agents, advances it and computes its status: the
// EngineUpgrade's it stands for, and how many agents are on the rendering.
func (r *Reconciler) reconcileNormal(ctx context.Context, rr, before *agentsv1.RenderingRollout, pass *rolloutPass) (ctrl.Result, error) {
	eu := asUpgrade(rr)
	goal := renderingGoal{platform: r.Platform}
	run := &controllers.Rollout{Client: r.Client, Recorder: r.Recorder, EU: eu, Obj: rr, Now: r.Clock.Now(), Goal: goal}
	if err := run.Load(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if stale, err := run.Pass(ctx); err != nil {
		return ctrl.Result{}, err
	} else if stale {
		pass.stale = true
		return ctrl.Result{RequeueAfter: controllers.StaleCacheRetry}, nil
	}
	rr.Status.EngineUpgradeStatus = eu.Status
	rr.Status.Current, rr.Status.Total = 0, int32(len(run.Agents()))
	for _, a := range run.Agents() {
		if goal.Reached(a) {
			rr.Status.Current++
		}
	}
	controllers.Announce(r.Recorder, rr, eu, &agentsv1.EngineUpgrade{Status: before.Status.EngineUpgradeStatus})
	return ctrl.Result{RequeueAfter: run.Wake()}, nil
}

// statusStep writes the status when it changed. A pass that ended early (an error, a stale
// cache) writes nothing: a rollout's status is consistent only after a whole pass. A write
// that conflicted runs the pass again on fresh data.
func statusStep(pass *rolloutPass) controllers.StatusStep {
	return controllers.StatusStep{
		Compute:           func(passOK bool) bool { return passOK && !pass.stale },
		RequeueOnConflict: true,
	}
}

// asUpgrade is the EngineUpgrade a RenderingRollout stands for: its workspaces, wave size,
// health timeout and pause, its status, and its rendering in place of a version.
func asUpgrade(rr *agentsv1.RenderingRollout) *agentsv1.EngineUpgrade {
	return &agentsv1.EngineUpgrade{
		ObjectMeta: *rr.ObjectMeta.DeepCopy(),
		Spec: agentsv1.EngineUpgradeSpec{
			Version: "rendering " + rr.Spec.Rendering, Workspaces: rr.Spec.Workspaces, WavePercent: rr.Spec.WavePercent,
			HealthTimeout: rr.Spec.HealthTimeout, Paused: rr.Spec.Paused,
		},
		Status: *rr.Status.EngineUpgradeStatus.DeepCopy(),
	}
}

// SetupWithManager registers the controller (RenderingRollouts, every Agent, the Snapshots
// it takes) and, on the leader, the making of the manager's RenderingRollout.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := mgr.Add(manager.RunnableFunc(r.ensureRollout)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.RenderingRollout{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.theRollout)).
		Watches(&agentsv1.Snapshot{}, handler.EnqueueRequestsFromMapFunc(controllers.RolloutOfSnapshot)).
		Named("renderingrollout").
		Complete(r)
}

// theRollout maps an Agent's change to the manager's RenderingRollout.
func (r *Reconciler) theRollout(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: RenderingRolloutName(r.Platform)}}}
}

// ensureRollout makes the manager's RenderingRollout unless it exists, and deletes the
// RenderingRollouts the manager made for other renderings. It runs on the leader, once it
// succeeded (a failure is logged and tried again).
func (r *Reconciler) ensureRollout(ctx context.Context) error {
	for wait := time.Second; ; wait = min(2*wait, time.Minute) {
		err := r.makeRollout(ctx)
		if err == nil {
			return nil
		}
		log.FromContext(ctx).Error(err, "make the manager's RenderingRollout")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (r *Reconciler) makeRollout(ctx context.Context) error {
	list := &agentsv1.RenderingRolloutList{}
	if err := r.List(ctx, list, client.HasLabels{agentsv1.LabelRenderingRollout}); err != nil {
		return err
	}
	for i := range list.Items {
		if old := &list.Items[i]; old.Spec.Rendering != r.Platform {
			if err := r.Delete(ctx, old, client.Preconditions{UID: &old.UID}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	rr := &agentsv1.RenderingRollout{
		ObjectMeta: metav1.ObjectMeta{Name: RenderingRolloutName(r.Platform), Labels: map[string]string{agentsv1.LabelRenderingRollout: "manager"}},
		Spec:       agentsv1.RenderingRolloutSpec{Rendering: r.Platform},
	}
	if err := r.Create(ctx, rr); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// renderingGoal moves agents to the manager's rendering of their gateway: the step allows
// the restart (AnnotationAllowedRendering naming status.renderingTarget), the Agent controller
// passes it to the runtime. An agent's status counts once this manager computed it (its
// renderingTarget starts with the manager's rendering); before, it is pending, unknown.
// Rollback cannot rebuild the old rendering (the new manager no longer renders it): the agent
// is left on the new rendering, marked Failed, and the rollout halts.
type renderingGoal struct{ platform string }

func (g renderingGoal) String() string { return "rendering " + g.platform }

func (g renderingGoal) known(a *agentsv1.Agent) bool {
	return strings.HasPrefix(a.Status.RenderingTarget, g.platform+".")
}

func (g renderingGoal) Reached(a *agentsv1.Agent) bool {
	return g.known(a) && a.Status.Rendering == agentsv1.RenderingCurrent
}

func (g renderingGoal) Wanted(a *agentsv1.Agent) (bool, bool) {
	if !g.known(a) {
		return false, true
	}
	return a.Status.Rendering == agentsv1.RenderingOutdated, false
}

func (g renderingGoal) Start(a *agentsv1.Agent) {
	a.Annotations[agentsv1.AnnotationAllowedRendering] = a.Status.RenderingTarget
}

func (g renderingGoal) Healthy(a *agentsv1.Agent) bool {
	return controllers.RolloutAgentReady(a) && g.Reached(a)
}

func (g renderingGoal) Rollback(*agentsv1.Agent, string, metav1.Time) (string, string) {
	return agentsv1.AgentUpgradeFailed, "left on the new rendering (the old one cannot be made again); the rollout halts"
}

func (g renderingGoal) FailedAs() string { return "left on the new rendering" }
