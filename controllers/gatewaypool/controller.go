// Package gatewaypool is the GatewayPool controller: it keeps warm gateways ready through the
// runtime, where the runtime can.
package gatewaypool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// poolRetry re-checks a pool that is not full: the runtime notifies every change of its
// members, this is only the safety net.
const poolRetry = time.Minute

// Reconciler keeps the runtime's warm pools as the GatewayPools say
// (runtime.Pooler) and reports what the runtime observes. Status is written only when it
// changed; the runtime's notifications (a member booted, crashed, was claimed) re-queue the
// pool. Claims become events of the pool and metrics.
type Reconciler struct {
	client.Client
	// Runtime runs the agents (nil: none here). Only a runtime.Pooler keeps pools; on any
	// other the pools report Ready=False, RuntimeUnsupported.
	Runtime runtime.Runtime
	// Versions resolves spec.engineVersion ("" = the default version).
	Versions engine.Versions
	Recorder events.EventRecorder
	// Metrics receives the pool metrics (nil: none are kept).
	Metrics prometheus.Registerer

	mu      sync.Mutex
	seen    map[string]*poolSeen
	metrics *poolMetrics
}

// poolSeen is what the controller accounted of one pool's claims in this process.
type poolSeen struct {
	uid types.UID
	// applied: the runtime's claims included in status.claimed; counted: in the claims
	// counter; lastSeq: the last claim turned into an event and a latency sample.
	applied, counted, lastSeq int64
}

// +kubebuilder:rbac:groups=agentplane.io,resources=gatewaypools,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=gatewaypools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile sets the runtime's pool from the spec and writes what the runtime observes, in the
// form of every reconciler here (controllers/doc.go). A GatewayPool holds no finalizer: once
// it is gone, its pool goes.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	pooler, supported := r.Runtime.(runtime.Pooler)
	gp := &agentsv1.GatewayPool{}
	if err := r.Get(ctx, req.NamespacedName, gp); err != nil {
		if apierrors.IsNotFound(err) {
			r.reconcileDelete(req.Name, pooler)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := gp.DeepCopy()
	pass := &poolPass{}
	defer func() {
		conflict, err := r.patchStatus(ctx, gp, before, pass)
		switch {
		case err != nil && reterr == nil:
			reterr = err
		case conflict:
			res = ctrl.Result{RequeueAfter: controllers.StaleCacheRetry} // again on fresh data
		}
	}()
	gp.Status.ObservedGeneration = gp.Generation
	if !supported {
		r.reconcileUnsupported(gp)
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, gp, pooler, pass), nil
}

// poolPass is what one pass learnt of the runtime's pool, for patchStatus.
type poolPass struct {
	seen *poolSeen
	st   runtime.PoolStatus
}

// reconcileDelete removes the pool of a GatewayPool that is gone and forgets its accounting.
func (r *Reconciler) reconcileDelete(name string, pooler runtime.Pooler) {
	if pooler != nil {
		pooler.RemovePool(name)
	}
	r.forget(name)
}

// reconcileUnsupported: the runtime keeps no warm gateways; the pool says so.
func (r *Reconciler) reconcileUnsupported(gp *agentsv1.GatewayPool) {
	name := "no runtime"
	if r.Runtime != nil {
		name = "the " + r.Runtime.Name() + " runtime"
	}
	gp.Status.Ready, gp.Status.Booting, gp.Status.Replicas, gp.Status.EngineVersion = 0, 0, 0, ""
	setPoolReady(gp, metav1.ConditionFalse, agentsv1.ReasonRuntimeUnsupported,
		fmt.Sprintf("agents run on %s here, which keeps no warm gateways: agents start cold (warm pools need the local runtime)", name))
}

// reconcileNormal sets the runtime's pool from the spec and computes the status from what the
// runtime observes; it returns when to look again.
func (r *Reconciler) reconcileNormal(ctx context.Context, gp *agentsv1.GatewayPool, pooler runtime.Pooler, pass *poolPass) ctrl.Result {
	version, offered := r.Versions.Resolve(gp.Spec.EngineVersion)
	seen := r.seenFor(gp, pooler.PoolStatus(gp.Name))
	pass.seen = seen
	gp.Status.EngineVersion = version
	if !offered {
		pooler.RemovePool(gp.Name)
		seen.applied, seen.counted, seen.lastSeq = 0, 0, 0
		gp.Status.Ready, gp.Status.Booting, gp.Status.Replicas = 0, 0, 0
		setPoolReady(gp, metav1.ConditionFalse, agentsv1.ReasonInvalidVersion, fmt.Sprintf("engine version %q is not offered", version))
		return ctrl.Result{}
	}
	spec := runtime.PoolSpec{Version: version, Size: int(gp.Spec.Replicas), Namespaces: gp.Spec.Workspaces}
	if err := pooler.SetPool(ctx, gp.Name, spec); errors.Is(err, runtime.ErrPoolNoNamespaces) {
		gp.Status.Ready, gp.Status.Booting, gp.Status.Replicas = 0, 0, 0
		setPoolReady(gp, metav1.ConditionFalse, agentsv1.ReasonPoolNoWorkspaces, fmt.Sprintf(
			"the %s runtime boots warm gateways in the namespaces of the agents that claim them and spec.workspaces names none: the pool keeps no gateway, agents start cold", r.Runtime.Name()))
		return ctrl.Result{}
	} else if err != nil {
		setPoolReady(gp, metav1.ConditionFalse, agentsv1.ReasonPoolFailed, controllers.Truncate(err.Error()))
		return ctrl.Result{}
	}
	st := pooler.PoolStatus(gp.Name)
	pass.st = st
	r.observeClaims(gp, seen, st)
	gp.Status.Ready, gp.Status.Booting = int32(st.Ready), int32(st.Booting)
	gp.Status.Replicas = gp.Status.Ready + gp.Status.Booting
	if delta := st.Claimed - seen.applied; delta > 0 {
		gp.Status.Claimed += delta
	}
	// What the runtime keeps in all: spec.replicas per workspace on the kube runtime.
	want := st.Size
	switch {
	case want == 0:
		setPoolReady(gp, metav1.ConditionTrue, agentsv1.ReasonPoolReady, "the pool keeps no gateway (spec.replicas is 0): agents start cold")
	case st.Ready >= want:
		setPoolReady(gp, metav1.ConditionTrue, agentsv1.ReasonPoolReady, fmt.Sprintf("%d gateways of engine %s are booted and idle", st.Ready, version))
	case st.Failures > 0:
		setPoolReady(gp, metav1.ConditionFalse, agentsv1.ReasonPoolMembersFailing,
			controllers.Truncate(fmt.Sprintf("%d of %d gateways ready; %d failed in a row, the last: %s", st.Ready, want, st.Failures, st.LastFailure)))
	default:
		setPoolReady(gp, metav1.ConditionFalse, agentsv1.ReasonPoolFilling, fmt.Sprintf("%d of %d gateways ready, %d booting", st.Ready, want, st.Booting))
	}
	var res ctrl.Result
	if st.Ready < want {
		res.RequeueAfter = poolRetry
	}
	if !st.RetryAt.IsZero() {
		// The runtime acts then (a member after failures, a reservation that expires).
		if d := time.Until(st.RetryAt) + 100*time.Millisecond; d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
			res.RequeueAfter = d
		}
	}
	return res
}

// patchStatus, deferred by Reconcile, patches the status when it changed (optimistic lock:
// status.claimed adds to what the object holds) and then takes the runtime's claims as
// applied. conflict reports a status written meanwhile: the pass runs again on fresh data.
func (r *Reconciler) patchStatus(ctx context.Context, gp, before *agentsv1.GatewayPool, pass *poolPass) (conflict bool, err error) {
	if _, err := controllers.PatchStatusIfChanged(ctx, r.Client, gp, before); err != nil {
		if apierrors.IsConflict(err) {
			return true, nil
		}
		return false, err
	}
	if pass.seen != nil {
		r.mu.Lock()
		pass.seen.applied = max(pass.seen.applied, pass.st.Claimed)
		r.mu.Unlock()
	}
	return false, nil
}

// seenFor returns the accounting of gp's pool, started anew for a new object of the name
// (claims the runtime counted before are not this object's).
func (r *Reconciler) seenFor(gp *agentsv1.GatewayPool, st runtime.PoolStatus) *poolSeen {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]*poolSeen{}
	}
	s := r.seen[gp.Name]
	if s == nil || s.uid != gp.UID {
		s = &poolSeen{uid: gp.UID, applied: st.Claimed, counted: st.Claimed}
		if n := len(st.Claims); n > 0 {
			s.lastSeq = st.Claims[n-1].Seq
		}
		r.seen[gp.Name] = s
	}
	if st.Claimed < s.applied { // the runtime's pool started over
		s.applied, s.counted, s.lastSeq = st.Claimed, st.Claimed, 0
	}
	return s
}

// observeClaims turns the claims not seen yet into events and metrics, and sets the depth.
func (r *Reconciler) observeClaims(gp *agentsv1.GatewayPool, seen *poolSeen, st runtime.PoolStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.metrics
	for _, c := range st.Claims {
		if c.Seq <= seen.lastSeq {
			continue
		}
		seen.lastSeq = c.Seq
		if m != nil {
			m.latency.WithLabelValues(gp.Name).Observe(c.Latency.Seconds())
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(gp, nil, corev1.EventTypeNormal, agentsv1.EventPoolClaimed, "Claim",
				"gateway %s bound to agent %s in %s", c.Member, c.Agent, c.Latency.Round(time.Millisecond))
		}
	}
	if m != nil {
		if d := st.Claimed - seen.counted; d > 0 {
			m.claims.WithLabelValues(gp.Name).Add(float64(d))
		}
		m.members.WithLabelValues(gp.Name, "ready").Set(float64(st.Ready))
		m.members.WithLabelValues(gp.Name, "booting").Set(float64(st.Booting))
	}
	seen.counted = max(seen.counted, st.Claimed)
}

// forget drops a deleted pool's accounting and metric series.
func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, name)
	if r.metrics != nil {
		r.metrics.forget(name)
	}
}

func setPoolReady(gp *agentsv1.GatewayPool, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&gp.Status.Conditions, metav1.Condition{
		Type: agentsv1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: gp.Generation,
	})
}

// SetupWithManager registers the controller: GatewayPools (spec changes, the scale
// subresource) and the runtime's pool notifications.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Metrics != nil {
		r.metrics = newPoolMetrics(r.Metrics)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&agentsv1.GatewayPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("gatewaypool")
	if p, ok := r.Runtime.(runtime.Pooler); ok {
		b = p.SetupPoolWatches(b)
	}
	return b.Complete(r)
}
