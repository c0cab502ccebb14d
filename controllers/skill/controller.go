// Package skill is the Skill controller: it checks that each skill's bundle is in storage and
// records the agents it is attached to.
package skill

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// Reconciler keeps each Skill's status true to the world: whether its bundle is in the
// workspace's storage (Ready, size) and which agents attach it (any of its CIDs, the current
// one or an earlier version's that an agent still pins).
type Reconciler struct {
	client.Client
	// Store holds the bundles (space `<namespace>/skills`); nil when storage is not configured.
	Store storage.Store
	// RetryAfter is how soon a Skill whose storage could not be reached is looked at again
	// (default 30 s).
	RetryAfter time.Duration
}

// +kubebuilder:rbac:groups=agentplane.io,resources=skills,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=skills/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch

// Reconcile converges one Skill's status in the form of every reconciler here
// (controllers/doc.go). A Skill holds no finalizer.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	sk := &agentsv1.Skill{}
	if err := r.Get(ctx, req.NamespacedName, sk); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := sk.DeepCopy()
	defer func() { controllers.PatchStatus(ctx, r.Client, sk, before, statusStep(sk), &res, &reterr) }()
	return r.reconcileNormal(ctx, sk)
}

// reconcileNormal computes which agents use the skill and whether its bundle is there; a
// bundle that could not be checked (storage unavailable) is looked at again later.
func (r *Reconciler) reconcileNormal(ctx context.Context, sk *agentsv1.Skill) (ctrl.Result, error) {
	attached, err := r.attachedAgents(ctx, sk)
	if err != nil {
		return ctrl.Result{}, err
	}
	sk.Status.AttachedTo = attached
	ready, size := r.computeReadyCondition(ctx, sk)
	meta.SetStatusCondition(&sk.Status.Conditions, ready)
	if size > 0 {
		sk.Status.Size = size
	}
	if ready.Reason == agentsv1.ReasonStorageUnavailable {
		return ctrl.Result{RequeueAfter: cmp.Or(r.RetryAfter, 30*time.Second)}, nil
	}
	return ctrl.Result{}, nil
}

// statusStep acknowledges the generation once the bundle was checked (not converged while
// storage is unavailable) and writes the status when it changed; a pass that failed writes
// nothing.
func statusStep(sk *agentsv1.Skill) controllers.StatusStep {
	return controllers.StatusStep{Compute: func(passOK bool) bool {
		if !passOK {
			return false
		}
		if ready := meta.FindStatusCondition(sk.Status.Conditions, agentsv1.ConditionReady); ready == nil || ready.Reason != agentsv1.ReasonStorageUnavailable {
			sk.Status.ObservedGeneration = sk.Generation
		}
		return true
	}}
}

// attachedAgents are the agents (not being deleted) whose spec.skills hold one of the skill's
// CIDs (IndexAgentSkillCID), sorted; nil when there are none.
func (r *Reconciler) attachedAgents(ctx context.Context, sk *agentsv1.Skill) ([]string, error) {
	var out []string
	for _, c := range sk.CIDs() {
		var agents agentsv1.AgentList
		if err := r.List(ctx, &agents, client.InNamespace(sk.Namespace), client.MatchingFields{agentsv1.IndexAgentSkillCID: c}); err != nil {
			return nil, err
		}
		for i := range agents.Items {
			if a := &agents.Items[i]; a.DeletionTimestamp == nil {
				out = append(out, a.Name)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

// computeReadyCondition: the bundle of spec.cid is in storage (its size is returned too).
func (r *Reconciler) computeReadyCondition(ctx context.Context, sk *agentsv1.Skill) (metav1.Condition, int64) {
	c := metav1.Condition{Type: agentsv1.ConditionReady, ObservedGeneration: sk.Generation, Status: metav1.ConditionFalse}
	if r.Store == nil {
		c.Reason, c.Message = agentsv1.ReasonStorageNotConfigured, "no storage is configured: the bundle cannot be checked or unpacked"
		return c, 0
	}
	obj, err := r.Store.Stat(ctx, storage.SkillsSpace(sk.Namespace), sk.Spec.CID)
	switch {
	case err == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, agentsv1.ReasonSkillStored, "the bundle is in storage"
		return c, obj.Size
	case errors.Is(err, storage.ErrNotFound):
		c.Reason, c.Message = agentsv1.ReasonSkillBundleMissing, "storage holds no bundle with CID "+sk.Spec.CID+": install the skill through the REST API, or upload the bundle"
	default:
		c.Reason, c.Message = agentsv1.ReasonStorageUnavailable, "storage could not be reached; checking again shortly"
	}
	return c, 0
}

// SetupWithManager registers the controller: Skills, and Agents (which change who attaches
// what).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.Skill{}).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(controllers.SkillsOfAgent(r.Client))).
		Named("skill").
		Complete(r)
}
