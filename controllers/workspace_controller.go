package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/quota"
	"github.com/agentplane/agentplane/internal/tenancy"
)

// Workspace phases.
const (
	WorkspaceActive      = "Active"
	WorkspaceTerminating = "Terminating"
)

// WorkspaceReconciler gives each Workspace its namespace and keeps its status (agent count,
// stale reservations) in step with the world.
type WorkspaceReconciler struct {
	client.Client
	// Limiter keeps the reservations; its clock judges their age.
	Limiter *quota.Limiter
}

// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;update;patch

// Reconcile converges one Workspace.
func (r *WorkspaceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ws := &agentsv1.Workspace{}
	if err := r.Get(ctx, req.NamespacedName, ws); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := ws.DeepCopy()
	if ws.DeletionTimestamp != nil {
		ws.Status.Phase = WorkspaceTerminating
		return ctrl.Result{}, r.patchStatus(ctx, ws, before)
	}

	nsErr := tenancy.EnsureNamespace(ctx, r.Client, ws)
	var agents agentsv1.AgentList
	// Only names are read: no deep copy of every agent per pass (the cache's objects are not
	// modified).
	if err := r.List(ctx, &agents, client.InNamespace(ws.Name), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	existing := make(map[string]bool, len(agents.Items))
	for _, a := range agents.Items {
		existing[a.Name] = true
	}
	requeue := time.Duration(0)
	// Reservations whose agent never appeared are released once stale. The cached status says
	// whether there is any candidate; only then does the Limiter go to the API server.
	for _, res := range ws.Status.AgentReservations {
		if existing[res.Name] {
			continue
		}
		if age := r.Limiter.Now().Sub(res.Time.Time); age < r.Limiter.StaleAge() {
			requeue = r.Limiter.StaleAge() - age + time.Second
			continue
		}
		if err := r.Limiter.PruneAgents(ctx, ws.Name, func(n string) bool { return existing[n] }); err != nil {
			return ctrl.Result{}, err
		}
		break
	}

	ws.Status.Namespace = ws.Name
	ws.Status.Agents = int32(len(agents.Items))
	ws.Status.AgentLimit = int32(ws.EffectiveAgentLimit())
	ws.Status.ObservedGeneration = ws.Generation
	meta.SetStatusCondition(&ws.Status.Conditions, computeWorkspaceReady(ws, nsErr))
	if nsErr == nil {
		ws.Status.Phase = WorkspaceActive
	}
	if err := r.patchStatus(ctx, ws, before); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nsErr
}

// computeWorkspaceReady is the Ready condition: the namespace exists.
func computeWorkspaceReady(ws *agentsv1.Workspace, nsErr error) metav1.Condition {
	c := metav1.Condition{Type: agentsv1.ConditionReady, ObservedGeneration: ws.Generation}
	if nsErr != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NamespaceFailed", nsErr.Error()
		return c
	}
	c.Status, c.Reason, c.Message = metav1.ConditionTrue, "NamespaceReady", "namespace "+ws.Name+" holds the workspace"
	return c
}

// patchStatus writes status only when it changed, so a pass that finds nothing new does not
// trigger another.
func (r *WorkspaceReconciler) patchStatus(ctx context.Context, ws, before *agentsv1.Workspace) error {
	if changed, err := patchStatusIfChanged(ctx, r.Client, ws, before); err != nil || !changed {
		return err
	}
	log.FromContext(ctx).V(1).Info("workspace status updated", "phase", ws.Status.Phase, "agents", ws.Status.Agents)
	return nil
}

// SetupWithManager registers the controller: Workspaces, their namespaces and the creation
// and deletion of their agents (what the agent count and the reservations depend on; an
// agent's updates do not change them, and with many agents they would cost a pass each).
func (r *WorkspaceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.Workspace{}).
		Owns(&corev1.Namespace{}).
		Watches(&agentsv1.Agent{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Named("workspace").
		Complete(r)
}
