// Package workspace is the Workspace controller: it gives each workspace its namespace and
// keeps its counts and agent slots in step with the world.
package workspace

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/rules/quota"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
	"github.com/agentplane/agentplane/internal/watchfilter"
)

// Workspace phases.
const (
	Active      = "Active"
	Terminating = "Terminating"
)

// Reconciler gives each Workspace its namespace and keeps its status (agent count,
// the agent limit's slots) in step with the world.
type Reconciler struct {
	client.Client
	// Limiter keeps the slots; its clock judges their age.
	Limiter *quota.Limiter
	// RecountAfter is the least time between two recounts of one workspace (default
	// DefaultRecountAfter).
	RecountAfter time.Duration

	lastRecount sync.Map // workspace name -> time.Time
}

// DefaultRecountAfter: a workspace whose count disagrees with its agents is recounted at most
// this often (a recount lists its agents live).
const DefaultRecountAfter = time.Minute

// settleDelay gathers the agent events of a burst into one pass of their workspace.
const settleDelay = time.Second

// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=files,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=snapshots,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;update;patch

// Reconcile converges one Workspace in the form of every reconciler here (controllers/doc.go).
// A Workspace holds no finalizer: its deletion only shows in its phase.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	ws := &agentsv1.Workspace{}
	if err := r.Get(ctx, req.NamespacedName, ws); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ws.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, ws)
	}
	before := ws.DeepCopy()
	pass := &workspacePass{}
	defer func() { controllers.PatchStatus(ctx, r.Client, ws, before, statusStep(ctx, ws, pass), &res, &reterr) }()
	return r.reconcileNormal(ctx, ws, pass)
}

// workspacePass tells the status step whether the pass computed the whole status: one that failed
// before (a list, a slot or storage write) writes nothing, a namespace that could not be made
// is written (Ready says why) and returned as the pass's error.
type workspacePass struct{ computed bool }

// reconcileDelete shows the deletion in the phase.
func (r *Reconciler) reconcileDelete(ctx context.Context, ws *agentsv1.Workspace) (res ctrl.Result, reterr error) {
	before := ws.DeepCopy()
	defer func() {
		controllers.PatchStatus(ctx, r.Client, ws, before, statusStep(ctx, ws, &workspacePass{computed: true}), &res, &reterr)
	}()
	ws.Status.Phase = Terminating
	return ctrl.Result{}, nil
}

// reconcileNormal makes the namespace, settles the agent slots and the storage counts, and
// computes the status.
func (r *Reconciler) reconcileNormal(ctx context.Context, ws *agentsv1.Workspace, pass *workspacePass) (ctrl.Result, error) {
	nsErr := workspacens.EnsureNamespace(ctx, r.Client, ws)
	var agents agentsv1.AgentList
	// The cache's objects are read, never modified: no deep copy of every agent per pass.
	if err := r.List(ctx, &agents, client.InNamespace(ws.Name), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	requeue, err := r.reconcileSlots(ctx, ws, agents.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	storageRequeue, err := r.reconcileStorage(ctx, ws, agents.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	requeue = minPositive(requeue, storageRequeue)

	ws.Status.Namespace = ws.Name
	ws.Status.Agents = int32(len(agents.Items))
	ws.Status.AgentLimit = int32(ws.EffectiveAgentLimit())
	ws.Status.ObservedGeneration = ws.Generation
	meta.SetStatusCondition(&ws.Status.Conditions, computeWorkspaceReady(ws, nsErr))
	if nsErr == nil {
		ws.Status.Phase = Active
	}
	pass.computed = true
	return ctrl.Result{RequeueAfter: requeue}, nsErr
}

// reconcileSlots settles the agent limit's slots (pending ones of bound agents counted, stale
// ones freed, finished releases forgotten), judged on the cache: the Limiter, and so the API
// server, is called only when something is to change. A quiet workspace (nothing in flight)
// whose count disagrees with its bound agents is recounted exactly. It returns when to look
// again (a settle waiting for a quiet moment, a pending slot turning stale, a recount held
// back).
func (r *Reconciler) reconcileSlots(ctx context.Context, ws *agentsv1.Workspace, agents []agentsv1.Agent) (time.Duration, error) {
	seen := make(map[string]quota.AgentSeen, len(agents))
	bound := 0
	for _, a := range agents {
		seen[a.Name] = quota.AgentSeen{UID: a.UID, Bound: a.Status.HoldsSlot}
		if a.Status.HoldsSlot {
			bound++
		}
	}
	lookup := func(name string) (quota.AgentSeen, bool) { s, ok := seen[name]; return s, ok }
	slots := ws.Status.AgentSlots
	if r.Limiter.SettleNeeded(slots, lookup) {
		// A burst settles itself with its own writes; what is left waits for a quiet moment.
		if wait := r.Limiter.SettleAt(slots).Sub(r.Limiter.Now()); wait > 0 {
			return wait, nil
		}
		// The write makes another pass, which looks at what is left.
		return 0, r.Limiter.SettleAgents(ctx, ws.Name, lookup)
	}
	var requeue time.Duration
	if at := r.Limiter.NextStale(slots, lookup); !at.IsZero() {
		requeue = at.Sub(r.Limiter.Now()) + time.Second
	}
	if len(slots.Pending) > 0 || len(slots.Releasing) > 0 || int(slots.Used) == bound {
		return requeue, nil
	}
	every := r.RecountAfter
	if every <= 0 {
		every = DefaultRecountAfter
	}
	if last, ok := r.lastRecount.Load(ws.Name); ok {
		if wait := last.(time.Time).Add(every).Sub(r.Limiter.Now()); wait > 0 {
			return minPositive(requeue, wait), nil
		}
	}
	r.lastRecount.Store(ws.Name, r.Limiter.Now())
	log.FromContext(ctx).Info("recounting the agent limit's slots", "used", slots.Used, "bound", bound)
	return requeue, r.Limiter.RecountAgents(ctx, ws.Name)
}

// reconcileStorage recounts the storage quotas holding a stale reservation (a caller died
// between reserving and settling, or its settle was lost): the count is rebuilt from the
// objects. The uploads count is also recounted, at most every RecountAfter, when no upload is
// in flight and it disagrees with the agents' tallies: an agent deleted gives its uploads
// back. It returns when to look again.
func (r *Reconciler) reconcileStorage(ctx context.Context, ws *agentsv1.Workspace, agents []agentsv1.Agent) (time.Duration, error) {
	due, next := r.Limiter.StorageRecountDue(ws)
	var requeue time.Duration
	if !slices.Contains(due, agentsv1.StorageUploads) && uploadsDrift(ws, agents) {
		if wait := r.recountWait("uploads/" + ws.Name); wait > 0 {
			requeue = wait
		} else {
			due = append(due, agentsv1.StorageUploads)
		}
	}
	for _, kind := range due {
		log.FromContext(ctx).Info("recounting a storage quota (a stale reservation, or uploads that disagree with the agents' tallies)", "kind", kind)
		if err := r.Limiter.RecountStorage(ctx, ws.Name, kind); err != nil {
			return 0, err
		}
	}
	if next.IsZero() {
		return requeue, nil
	}
	return minPositive(requeue, next.Sub(r.Limiter.Now())+time.Second), nil
}

// uploadsDrift reports whether ws's uploads count, with no upload in flight, disagrees with
// its agents' tallies (read from the cache).
func uploadsDrift(ws *agentsv1.Workspace, agents []agentsv1.Agent) bool {
	c := ws.Status.Storage.Uploads
	if len(c.Pending) > 0 {
		return false
	}
	var bytes, objects int64
	for i := range agents {
		b, o := agentsv1.UploadTally(&agents[i])
		bytes, objects = bytes+b, objects+o
	}
	return bytes != c.Bytes || objects != c.Objects
}

// recountWait is how long a recount under key must still wait (RecountAfter since the last);
// zero: it may run now, and is recorded as run.
func (r *Reconciler) recountWait(key string) time.Duration {
	every := r.RecountAfter
	if every <= 0 {
		every = DefaultRecountAfter
	}
	if last, ok := r.lastRecount.Load(key); ok {
		if wait := last.(time.Time).Add(every).Sub(r.Limiter.Now()); wait > 0 {
			return wait
		}
	}
	r.lastRecount.Store(key, r.Limiter.Now())
	return 0
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
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

// statusStep writes the status a pass computed whole (pass.computed), only when it changed,
// so a pass that finds nothing new does not trigger another. Without a lock: the patch holds
// only the fields this controller changed, never the slots (the Limiter's, written with
// optimistic concurrency).
func statusStep(ctx context.Context, ws *agentsv1.Workspace, pass *workspacePass) controllers.StatusStep {
	return controllers.StatusStep{
		Compute: func(bool) bool { return pass.computed },
		Written: func(changed bool) {
			if changed {
				log.FromContext(ctx).V(1).Info("workspace status updated", "phase", ws.Status.Phase, "agents", ws.Status.Agents)
			}
		},
		Options: []controllers.StatusPatchOption{controllers.WithoutLock},
	}
}

// SetupWithManager registers the controller: Workspaces (their spec, and their slots when
// another writer changed them), their namespaces, and what the count and the slots depend on
// in their agents (creation, deletion, binding). Slot and agent events are gathered for
// settleDelay, so a burst of thousands of agents costs a pass a second, not a pass each.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.Workspace{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Namespace{}).
		Watches(&agentsv1.Workspace{}, enqueueAfter(settleDelay, func(o client.Object) string { return o.GetName() }),
			builder.WithPredicates(watchfilter.OnlyUpdates(func(o, n *agentsv1.Workspace) bool {
				return !equality.Semantic.DeepEqual(o.Status.AgentSlots, n.Status.AgentSlots) ||
					storagePendingChanged(&o.Status.Storage, &n.Status.Storage)
			}))).
		Watches(&agentsv1.Agent{}, enqueueAfter(settleDelay, client.Object.GetNamespace),
			builder.WithPredicates(watchfilter.Updates(func(o, n *agentsv1.Agent) bool {
				return o.Status.HoldsSlot != n.Status.HoldsSlot || o.Annotations[agentsv1.AnnotationUploads] != n.Annotations[agentsv1.AnnotationUploads]
			}))).
		Named("workspace").
		Complete(r)
}

// storagePendingChanged reports whether a storage quota's reservations changed (the Workspace
// controller then looks again at when the oldest turns stale).
func storagePendingChanged(o, n *agentsv1.StorageUsage) bool {
	for _, kind := range agentsv1.StorageKinds {
		if len(o.Count(kind).Pending) != len(n.Count(kind).Pending) {
			return true
		}
	}
	return false
}

// enqueueAfter enqueues the workspace named by name(o) delay after an event; the queue keeps
// one entry per workspace however many events arrive meanwhile.
func enqueueAfter(delay time.Duration, name func(client.Object) string) handler.EventHandler {
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: name(o)}}, delay)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
	}
}
