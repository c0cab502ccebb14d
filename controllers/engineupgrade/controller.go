// Package engineupgrade is the EngineUpgrade controller: it moves the agents an upgrade
// selects to a new engine version, in waves.
package engineupgrade

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/promreg"
)

// defaultHealthTimeout applies when spec.healthTimeout is unset (the CRD defaults it too).
const defaultHealthTimeout = 5 * time.Minute

// Reconciler rolls EngineUpgrades out in waves. Per agent of a wave it takes a
// Snapshot, then sets spec.engine.version to the target, then waits for the gateway to run
// the target and be Ready within spec.healthTimeout; an agent that is not is rolled back
// (its previous version, its workspace restored from the snapshot) and the rollout halts.
// Each agent's progress lives in annotations on the Agent (api/v1alpha1
// AnnotationUpgrade*), so a restarted manager resumes where it stopped. It writes Agent
// spec and metadata (never Agent status) and the policy's status, only when it changed.
type Reconciler struct {
	client.Client
	// Versions are the engine versions the platform offers.
	Versions engine.Versions
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
			r.forgetMetrics(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := eu.DeepCopy()
	stale := false
	defer func() {
		// A pass that ended early (an error, a stale cache) writes nothing: a rollout's
		// status is consistent only after a whole pass (advance may have added a wave it
		// could not start).
		if reterr != nil || stale {
			return
		}
		if conflict, err := r.patchStatus(ctx, eu, before); err != nil {
			res, reterr = ctrl.Result{}, err
		} else if conflict {
			res = ctrl.Result{RequeueAfter: controllers.StaleCacheRetry} // again on fresh data
		}
	}()
	res, stale, reterr = r.reconcileNormal(ctx, eu, before)
	return res, reterr
}

// reconcileNormal loads the rollout's agents, advances it and computes its status; stale: a
// write conflicted (a stale cache: the pass runs again on fresh data, soon).
func (r *Reconciler) reconcileNormal(ctx context.Context, eu, before *agentsv1.EngineUpgrade) (res ctrl.Result, stale bool, err error) {
	target, offered := r.Versions.Resolve(eu.Spec.Version)
	if !offered {
		setUpgradeStatus(eu, upgradeView{invalid: fmt.Sprintf("engine version %q is not offered", target)})
		return ctrl.Result{}, false, nil
	}
	run := &upgradeRun{r: r, eu: eu, obj: eu, now: r.Clock.Now()}
	run.goal = engineGoal{u: run, target: target}
	if err := run.load(ctx); err != nil {
		var bad invalidSelectorError
		if errors.As(err, &bad) {
			setUpgradeStatus(eu, upgradeView{invalid: bad.Error(), invalidReason: agentsv1.ReasonInvalidSelector})
			return ctrl.Result{}, false, nil
		}
		return ctrl.Result{}, false, err
	}
	if stale, err := run.pass(ctx); err != nil {
		return ctrl.Result{}, false, err
	} else if stale {
		return ctrl.Result{RequeueAfter: controllers.StaleCacheRetry}, true, nil
	}
	r.announce(eu, eu, before)
	if run.wake > 0 {
		res.RequeueAfter = run.wake
	}
	return res, false, nil
}

// pass advances the rollout and computes its status; stale: a write conflicted (a stale
// cache: the pass runs again on fresh data).
func (u *upgradeRun) pass(ctx context.Context) (stale bool, err error) {
	if err := u.advance(ctx); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, err
	}
	setUpgradeStatus(u.eu, u.view())
	return false, nil
}

// patchStatus records the rollout's metrics and writes its status when it changed; conflict
// reports a status written meanwhile.
func (r *Reconciler) patchStatus(ctx context.Context, eu, before *agentsv1.EngineUpgrade) (conflict bool, err error) {
	r.observeMetrics(eu)
	if _, err := controllers.PatchStatusIfChanged(ctx, r.Client, eu, before); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// announce records the rollout's phase changes as events of the rollout object obj (eu, or
// the RenderingRollout eu stands for).
func (r *Reconciler) announce(obj client.Object, eu, before *agentsv1.EngineUpgrade) {
	if eu.Status.Phase == before.Status.Phase {
		return
	}
	switch eu.Status.Phase {
	case agentsv1.UpgradeHalted:
		r.event(obj, nil, corev1.EventTypeWarning, agentsv1.EventHalted, "Halt",
			"rollout to %s halted: %v failed; change the spec (for example pause and unpause) to resume", eu.Spec.Version, eu.Status.FailedAgents)
	case agentsv1.UpgradeSucceeded:
		r.event(obj, nil, corev1.EventTypeNormal, agentsv1.EventSucceeded, "Succeed",
			"%d agents moved to %s", eu.Status.Counts.Upgraded, eu.Spec.Version)
	}
}

func (r *Reconciler) event(regarding, related client.Object, typ, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(regarding, related, typ, reason, action, note, args...)
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
		Watches(&agentsv1.Snapshot{}, handler.EnqueueRequestsFromMapFunc(policyOfSnapshot)).
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

// policyOfSnapshot maps a Snapshot an EngineUpgrade took to that policy.
func policyOfSnapshot(_ context.Context, obj client.Object) []reconcile.Request {
	if p := obj.GetLabels()[agentsv1.LabelUpgrade]; p != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p}}}
	}
	return nil
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

// healthTimeout is spec.healthTimeout or the default.
func healthTimeout(eu *agentsv1.EngineUpgrade) time.Duration {
	if eu.Spec.HealthTimeout != nil && eu.Spec.HealthTimeout.Duration > 0 {
		return eu.Spec.HealthTimeout.Duration
	}
	return defaultHealthTimeout
}

// currentWave is the last wave when it is still upgrading.
func currentWave(eu *agentsv1.EngineUpgrade) *agentsv1.UpgradeWave {
	if n := len(eu.Status.Waves); n > 0 && eu.Status.Waves[n-1].State == agentsv1.WaveUpgrading {
		return &eu.Status.Waves[n-1]
	}
	return nil
}

// startWave appends a wave of the given agents.
func startWave(eu *agentsv1.EngineUpgrade, agents []string, now time.Time) *agentsv1.UpgradeWave {
	eu.Status.CurrentWave++
	eu.Status.Waves = append(eu.Status.Waves, agentsv1.UpgradeWave{
		Index: eu.Status.CurrentWave, Agents: slices.Clone(agents), State: agentsv1.WaveUpgrading,
		StartedAt: &metav1.Time{Time: now},
	})
	return &eu.Status.Waves[len(eu.Status.Waves)-1]
}
