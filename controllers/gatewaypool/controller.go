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
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/admission"
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
	Versions admission.Versions
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
	pass := &poolPass{unsupported: !supported}
	defer func() { controllers.PatchStatus(ctx, r.Client, gp, before, r.statusStep(gp, pass), &res, &reterr) }()
	if !supported {
		return ctrl.Result{}, nil // the runtime keeps no warm gateways; the pool says so
	}
	return r.reconcileNormal(ctx, gp, pooler, pass), nil
}

// poolPass is what one pass learnt of the runtime's pool: the status is computed from it
// (computeStatus) and, once written, the runtime's claims are taken as applied.
type poolPass struct {
	// unsupported: the runtime keeps no pools.
	unsupported bool
	// version is the engine version of spec.engineVersion; offered: the platform offers it.
	version string
	offered bool
	// setErr: the runtime refused the pool.
	setErr error
	seen   *poolSeen
	st     runtime.PoolStatus
}

// reconcileDelete removes the pool of a GatewayPool that is gone and forgets its accounting.
func (r *Reconciler) reconcileDelete(name string, pooler runtime.Pooler) {
	if pooler != nil {
		pooler.RemovePool(name)
	}
	r.forget(name)
}

// reconcileNormal sets the runtime's pool from the spec and records what the runtime observes
// in pass; it returns when to look again.
func (r *Reconciler) reconcileNormal(ctx context.Context, gp *agentsv1.GatewayPool, pooler runtime.Pooler, pass *poolPass) ctrl.Result {
	pass.version, pass.offered = r.Versions.Resolve(gp.Spec.EngineVersion)
	seen := r.seenFor(gp, pooler.PoolStatus(gp.Name))
	pass.seen = seen
	if !pass.offered {
		pooler.RemovePool(gp.Name)
		seen.applied, seen.counted, seen.lastSeq = 0, 0, 0
		return ctrl.Result{}
	}
	spec := runtime.PoolSpec{Version: pass.version, Size: int(gp.Spec.Replicas), Namespaces: gp.Spec.Workspaces}
	if pass.setErr = pooler.SetPool(ctx, gp.Name, spec); pass.setErr != nil {
		return ctrl.Result{}
	}
	st := pooler.PoolStatus(gp.Name)
	pass.st = st
	r.observeClaims(gp, seen, st)
	var res ctrl.Result
	if st.Ready < st.Size {
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

// statusStep computes the status from what the pass learnt and, once it is written (with
// optimistic lock: status.claimed adds to what the object holds; a conflict runs the pass again
// on fresh data), takes the runtime's claims as applied.
func (r *Reconciler) statusStep(gp *agentsv1.GatewayPool, pass *poolPass) controllers.StatusStep {
	return controllers.StatusStep{
		Compute: func(bool) bool {
			r.computeStatus(gp, pass)
			return true
		},
		Written: func(bool) {
			if pass.seen != nil {
				r.mu.Lock()
				pass.seen.applied = max(pass.seen.applied, pass.st.Claimed)
				r.mu.Unlock()
			}
		},
		RequeueOnConflict: true,
	}
}

// computeStatus is the one place the pool's status is made: the generation, the engine
// version, the counts of gateways and claims, and the Ready condition.
func (r *Reconciler) computeStatus(gp *agentsv1.GatewayPool, pass *poolPass) {
	gp.Status.ObservedGeneration = gp.Generation
	switch {
	case pass.unsupported:
		gp.Status.Ready, gp.Status.Booting, gp.Status.Replicas, gp.Status.EngineVersion = 0, 0, 0, ""
	case !pass.offered || errors.Is(pass.setErr, runtime.ErrPoolNoNamespaces):
		gp.Status.Ready, gp.Status.Booting, gp.Status.Replicas, gp.Status.EngineVersion = 0, 0, 0, pass.version
	case pass.setErr != nil:
		gp.Status.EngineVersion = pass.version // the counts stay as they were
	default:
		gp.Status.EngineVersion = pass.version
		gp.Status.Ready, gp.Status.Booting = int32(pass.st.Ready), int32(pass.st.Booting)
		gp.Status.Replicas = gp.Status.Ready + gp.Status.Booting
		if delta := pass.st.Claimed - pass.seen.applied; delta > 0 {
			gp.Status.Claimed += delta
		}
	}
	meta.SetStatusCondition(&gp.Status.Conditions, r.computeReadyCondition(gp, pass))
}

// computeReadyCondition: the pool keeps as many booted, idle gateways as it should (what the
// runtime keeps in all: spec.replicas per workspace on the kube runtime), or why not.
func (r *Reconciler) computeReadyCondition(gp *agentsv1.GatewayPool, pass *poolPass) metav1.Condition {
	c := metav1.Condition{Type: agentsv1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: gp.Generation}
	st, want := pass.st, pass.st.Size
	switch {
	case pass.unsupported:
		name := "no runtime"
		if r.Runtime != nil {
			name = "the " + r.Runtime.Name() + " runtime"
		}
		c.Reason, c.Message = agentsv1.ReasonRuntimeUnsupported,
			fmt.Sprintf("agents run on %s here, which keeps no warm gateways: agents start cold (warm pools need the local runtime)", name)
	case !pass.offered:
		c.Reason, c.Message = agentsv1.ReasonInvalidVersion, fmt.Sprintf("engine version %q is not offered", pass.version)
	case errors.Is(pass.setErr, runtime.ErrPoolNoNamespaces):
		c.Reason, c.Message = agentsv1.ReasonPoolNoWorkspaces, fmt.Sprintf(
			"the %s runtime boots warm gateways in the namespaces of the agents that claim them and spec.workspaces names none: the pool keeps no gateway, agents start cold", r.Runtime.Name())
	case pass.setErr != nil:
		c.Reason, c.Message = agentsv1.ReasonPoolFailed, controllers.Truncate(pass.setErr.Error())
	case want == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, agentsv1.ReasonPoolReady, "the pool keeps no gateway (spec.replicas is 0): agents start cold"
	case st.Ready >= want:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, agentsv1.ReasonPoolReady, fmt.Sprintf("%d gateways of engine %s are booted and idle", st.Ready, pass.version)
	case st.Failures > 0:
		c.Reason, c.Message = agentsv1.ReasonPoolMembersFailing,
			controllers.Truncate(fmt.Sprintf("%d of %d gateways ready; %d failed in a row, the last: %s", st.Ready, want, st.Failures, st.LastFailure))
	default:
		c.Reason, c.Message = agentsv1.ReasonPoolFilling, fmt.Sprintf("%d of %d gateways ready, %d booting", st.Ready, want, st.Booting)
	}
	return c
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
