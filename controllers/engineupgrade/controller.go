// Package engineupgrade is the EngineUpgrade controller: it moves the agents an upgrade
// selects to a new engine version, in waves.
package engineupgrade

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/promreg"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// Reconciler rolls EngineUpgrades out in waves (controllers.Rollout) towards an engine
// version. Per agent of a wave it takes a Snapshot, then sets spec.engine.version to the
// target, then waits for the gateway to run the target and be Ready within
// spec.healthTimeout; an agent that is not is rolled back (its previous version, its
// workspace restored from the snapshot) and the rollout halts. It writes Agent spec and
// metadata (never Agent status) and the policy's status, only when it changed.
type Reconciler struct {
	client.Client
	// Versions are the engine versions the platform offers.
	Versions admission.Versions
	Recorder events.EventRecorder
	// Clock tells the time (default: the real clock).
	Clock clock.PassiveClock
	// Metrics receives agentplane_engine_upgrade_agents (nil: none are kept).
	Metrics prometheus.Registerer

	metrics *prometheus.GaugeVec
}

// +kubebuilder:rbac:groups=agentplane.io,resources=engineupgrades,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=engineupgrades/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=snapshots,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile advances one rollout, the wave under way or the next one, in the form of every
// reconciler here (controllers/doc.go). An EngineUpgrade holds no finalizer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	eu := &agentsv1.EngineUpgrade{}
	if err := r.Get(ctx, req.NamespacedName, eu); err != nil {
		if apierrors.IsNotFound(err) {
			r.reconcileDelete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := eu.DeepCopy()
	pass := &upgradePass{}
	defer func() { controllers.PatchStatus(ctx, r.Client, eu, before, r.statusStep(eu, pass), &res, &reterr) }()
	return r.reconcileNormal(ctx, eu, before, pass)
}

// upgradePass is what the status step needs of a pass: stale, a write conflicted (a stale
// cache: the pass runs again on fresh data, soon).
type upgradePass struct{ stale bool }

// reconcileDelete forgets the metrics of a policy that is gone.
func (r *Reconciler) reconcileDelete(name string) { r.forgetMetrics(name) }

// reconcileNormal loads the rollout's agents, advances it and computes its status.
func (r *Reconciler) reconcileNormal(ctx context.Context, eu, before *agentsv1.EngineUpgrade, pass *upgradePass) (ctrl.Result, error) {
	target, offered := r.Versions.Resolve(eu.Spec.Version)
	if !offered {
		controllers.SetRolloutStatus(eu, controllers.RolloutView{Invalid: fmt.Sprintf("engine version %q is not offered", target)})
		return ctrl.Result{}, nil
	}
	run := &controllers.Rollout{Client: r.Client, Recorder: r.Recorder, EU: eu, Obj: eu, Now: r.Clock.Now(),
		Goal: engineGoal{versions: r.Versions, eu: eu, target: target}}
	if err := run.Load(ctx); err != nil {
		var bad controllers.InvalidSelectorError
		if errors.As(err, &bad) {
			controllers.SetRolloutStatus(eu, controllers.RolloutView{Invalid: bad.Error(), InvalidReason: agentsv1.ReasonInvalidSelector})
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	stale, err := run.Pass(ctx)
	if err != nil {
		return ctrl.Result{}, err
	} else if stale {
		pass.stale = true
		return ctrl.Result{RequeueAfter: controllers.StaleCacheRetry}, nil
	}
	controllers.Announce(r.Recorder, eu, eu, before)
	return ctrl.Result{RequeueAfter: run.Wake()}, nil
}

// statusStep records the rollout's metrics and writes its status when it changed. A pass
// that ended early (an error, a stale cache) writes nothing: a rollout's status is
// consistent only after a whole pass (it may have added a wave it could not start). A write
// that conflicted runs the pass again on fresh data.
func (r *Reconciler) statusStep(eu *agentsv1.EngineUpgrade, pass *upgradePass) controllers.StatusStep {
	return controllers.StatusStep{
		Compute: func(passOK bool) bool {
			if !passOK || pass.stale {
				return false
			}
			r.observeMetrics(eu)
			return true
		},
		RequeueOnConflict: true,
	}
}

// SetupWithManager registers the controller: EngineUpgrades (spec changes), every Agent
// (a change may start, finish or fail an upgrade; policies are few) and the Snapshots the
// controller takes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Metrics != nil {
		r.metrics = promreg.Register(r.Metrics, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentplane_engine_upgrade_agents",
			Help: "Agents selected by an EngineUpgrade, by state (pending, upgrading, upgraded, rolled_back).",
		}, []string{"policy", "state"}))
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.EngineUpgrade{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies)).
		Watches(&agentsv1.Snapshot{}, handler.EnqueueRequestsFromMapFunc(controllers.RolloutOfSnapshot)).
		Named("engineupgrade").
		Complete(r)
}

// allPolicies maps an Agent's change to every EngineUpgrade.
func (r *Reconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &agentsv1.EngineUpgradeList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, eu := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: eu.Name}})
	}
	return reqs
}

func (r *Reconciler) observeMetrics(eu *agentsv1.EngineUpgrade) {
	if r.metrics == nil {
		return
	}
	c := eu.Status.Counts
	for state, n := range map[string]int32{"pending": c.Pending, "upgrading": c.Upgrading, "upgraded": c.Upgraded, "rolled_back": c.RolledBack} {
		r.metrics.WithLabelValues(eu.Name, state).Set(float64(n))
	}
}

func (r *Reconciler) forgetMetrics(policy string) {
	if r.metrics != nil {
		r.metrics.DeletePartialMatch(prometheus.Labels{"policy": policy})
	}
}
