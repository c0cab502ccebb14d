package engineupgrade

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

// RenderingReconciler rolls RenderingRollouts out with the EngineUpgrade machinery: the same
// waves, snapshots, health deadlines and halts (upgradeRun), towards renderingGoal. A
// RenderingRollout stands in for an EngineUpgrade of its spec (asUpgrade) during a pass.
//
// When it starts leading, it makes the RenderingRollout of the manager's rendering (named
// RenderingRolloutName) unless it exists, and deletes those of other renderings (an
// earlier manager's: their agents' gateways can no longer move to them).
type RenderingReconciler struct {
	client.Client
	// Platform is the manager's rendering of the gateways (runtime.PlatformRenderer).
	Platform string
	Recorder events.EventRecorder
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=agentplane.io,resources=renderingrollouts,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=agentplane.io,resources=renderingrollouts/status,verbs=get;update;patch

// RenderingRolloutName is the name of the RenderingRollout the manager makes for its
// rendering.
func RenderingRolloutName(platform string) string { return "rendering-" + platform }

// Reconcile advances one RenderingRollout of the manager's rendering (others are left alone).
func (r *RenderingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rr := &agentsv1.RenderingRollout{}
	if err := r.Get(ctx, req.NamespacedName, rr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rr.Spec.Rendering != r.Platform {
		return ctrl.Result{}, nil
	}
	before := rr.DeepCopy()
	eu := asUpgrade(rr)
	run := &upgradeRun{r: &Reconciler{Client: r.Client, Recorder: r.Recorder}, eu: eu, obj: rr, now: r.Clock.Now()}
	run.goal = renderingGoal{platform: r.Platform}
	if err := run.load(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if stale, err := run.pass(ctx); err != nil {
		return ctrl.Result{}, err
	} else if stale {
		return ctrl.Result{RequeueAfter: controllers.StaleCacheRetry}, nil
	}
	rr.Status.EngineUpgradeStatus = eu.Status
	rr.Status.Current, rr.Status.Total = 0, int32(len(run.agents))
	for _, a := range run.agents {
		if run.goal.reached(a) {
			rr.Status.Current++
		}
	}
	run.r.announce(rr, eu, &agentsv1.EngineUpgrade{Status: before.Status.EngineUpgradeStatus})
	if _, err := controllers.PatchStatusIfChanged(ctx, r.Client, rr, before); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: controllers.StaleCacheRetry}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: run.wake}, nil
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
func (r *RenderingReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := mgr.Add(manager.RunnableFunc(r.ensureRollout)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.RenderingRollout{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.theRollout)).
		Watches(&agentsv1.Snapshot{}, handler.EnqueueRequestsFromMapFunc(policyOfSnapshot)).
		Named("renderingrollout").
		Complete(r)
}

// theRollout maps an Agent's change to the manager's RenderingRollout.
func (r *RenderingReconciler) theRollout(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: RenderingRolloutName(r.Platform)}}}
}

// ensureRollout makes the manager's RenderingRollout unless it exists, and deletes the
// RenderingRollouts the manager made for other renderings. It runs on the leader, once it
// succeeded (a failure is logged and tried again).
func (r *RenderingReconciler) ensureRollout(ctx context.Context) error {
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

func (r *RenderingReconciler) makeRollout(ctx context.Context) error {
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

func (g renderingGoal) reached(a *agentsv1.Agent) bool {
	return g.known(a) && a.Status.Rendering == agentsv1.RenderingCurrent
}

func (g renderingGoal) wanted(a *agentsv1.Agent) (bool, bool) {
	if !g.known(a) {
		return false, true
	}
	return a.Status.Rendering == agentsv1.RenderingOutdated, false
}

func (g renderingGoal) start(a *agentsv1.Agent) {
	a.Annotations[agentsv1.AnnotationAllowedRendering] = a.Status.RenderingTarget
}

func (g renderingGoal) healthy(a *agentsv1.Agent) bool { return ready(a) && g.reached(a) }

func (g renderingGoal) rollback(*agentsv1.Agent, string, metav1.Time) (string, string) {
	return agentsv1.AgentUpgradeFailed, "left on the new rendering (the old one cannot be made again); the rollout halts"
}
