package gatewaypool

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/scheme"
)

// noPools is a runtime that keeps no warm gateways.
type noPools struct{ runtime.Runtime }

func (noPools) Name() string { return "kube" }

// pooler is a runtime whose pool is what the test says.
type pooler struct {
	runtime.Runtime
	setErr  error
	st      runtime.PoolStatus
	set     []runtime.PoolSpec
	removed []string
}

func (*pooler) Name() string { return "local" }
func (p *pooler) SetPool(_ context.Context, _ string, spec runtime.PoolSpec) error {
	p.set = append(p.set, spec)
	return p.setErr
}
func (p *pooler) RemovePool(name string)                               { p.removed = append(p.removed, name) }
func (p *pooler) PoolStatus(string) runtime.PoolStatus                 { return p.st }
func (p *pooler) SetupPoolWatches(b *builder.Builder) *builder.Builder { return b }

var versions = admission.Versions{Default: "1.0", Available: []string{"1.0"}}

func pool(version string, replicas int32, claimed int64) *agentsv1.GatewayPool {
	return &agentsv1.GatewayPool{
		ObjectMeta: metav1.ObjectMeta{Name: "warm", Generation: 4},
		Spec:       agentsv1.GatewayPoolSpec{EngineVersion: version, Replicas: replicas},
		Status:     agentsv1.GatewayPoolStatus{Claimed: claimed},
	}
}

// TestReconcile: a pass writes the pool's status from what the runtime observes, in one place:
// the counts, the engine version, the claims added since the last pass, and the Ready condition
// with the reason of each state; the generation is acknowledged; and it says when to look again.
func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rt      runtime.Runtime
		gp      *agentsv1.GatewayPool
		reason  string
		ready   metav1.ConditionStatus
		counts  [3]int32 // ready, booting, replicas
		claimed int64
		version string
		requeue bool
	}{
		{name: "a runtime without pools", rt: noPools{}, gp: pool("", 2, 0),
			reason: agentsv1.ReasonRuntimeUnsupported, ready: metav1.ConditionFalse},
		{name: "a version not offered", rt: &pooler{}, gp: pool("9.9", 2, 0),
			reason: agentsv1.ReasonInvalidVersion, ready: metav1.ConditionFalse, version: "9.9"},
		{name: "no workspace to keep members in", rt: &pooler{setErr: runtime.ErrPoolNoNamespaces}, gp: pool("", 2, 0),
			reason: agentsv1.ReasonPoolNoWorkspaces, ready: metav1.ConditionFalse, version: "1.0"},
		{name: "the runtime refuses the pool", rt: &pooler{setErr: errors.New("not installed")}, gp: pool("", 2, 0),
			reason: agentsv1.ReasonPoolFailed, ready: metav1.ConditionFalse, version: "1.0"},
		{name: "no member asked for", rt: &pooler{}, gp: pool("", 0, 0),
			reason: agentsv1.ReasonPoolReady, ready: metav1.ConditionTrue, version: "1.0"},
		{name: "filling", rt: &pooler{st: runtime.PoolStatus{Size: 3, Ready: 1, Booting: 2}}, gp: pool("", 3, 0),
			reason: agentsv1.ReasonPoolFilling, ready: metav1.ConditionFalse, counts: [3]int32{1, 2, 3}, version: "1.0", requeue: true},
		{name: "members failing", rt: &pooler{st: runtime.PoolStatus{Size: 3, Ready: 1, Failures: 2, LastFailure: "crashed"}}, gp: pool("", 3, 0),
			reason: agentsv1.ReasonPoolMembersFailing, ready: metav1.ConditionFalse, counts: [3]int32{1, 0, 1}, version: "1.0", requeue: true},
		{name: "full", rt: &pooler{st: runtime.PoolStatus{Size: 2, Ready: 2}}, gp: pool("", 2, 0),
			reason: agentsv1.ReasonPoolReady, ready: metav1.ConditionTrue, counts: [3]int32{2, 0, 2}, version: "1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.gp).WithStatusSubresource(tc.gp).Build()
			r := &Reconciler{Client: c, Runtime: tc.rt, Versions: versions}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.gp)})
			if err != nil {
				t.Fatal(err)
			}
			got := &agentsv1.GatewayPool{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.gp), got); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
			if cond == nil || cond.Reason != tc.reason || cond.Status != tc.ready || cond.ObservedGeneration != 4 {
				t.Fatalf("Ready %+v, want %s %s", cond, tc.ready, tc.reason)
			}
			s := got.Status
			if [3]int32{s.Ready, s.Booting, s.Replicas} != tc.counts || s.EngineVersion != tc.version || s.ObservedGeneration != 4 {
				t.Errorf("status %+v, want counts %v, version %q, generation 4", s, tc.counts, tc.version)
			}
			if (res.RequeueAfter > 0) != tc.requeue {
				t.Errorf("result %+v, want a requeue: %v", res, tc.requeue)
			}
		})
	}
}

// TestClaimsCountOnce: status.claimed adds the runtime's claims made since the pass before,
// once: a pass that sees the same count adds nothing, and a write that conflicts takes none as
// applied (the pass runs again soon, on fresh data, and counts them then).
func TestClaimsCountOnce(t *testing.T) {
	ctx := context.Background()
	gp := pool("", 1, 5)
	conflicts := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(gp).WithStatusSubresource(gp).Build(),
		interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Resource: "gatewaypools"}, obj.GetName(), errors.New("changed"))
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}})
	rt := &pooler{st: runtime.PoolStatus{Size: 1, Ready: 1}}
	r := &Reconciler{Client: c, Runtime: rt, Versions: versions}
	pass := func() (ctrl.Result, int64) {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(gp)})
		if err != nil {
			t.Fatal(err)
		}
		got := &agentsv1.GatewayPool{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(gp), got); err != nil {
			t.Fatal(err)
		}
		return res, got.Status.Claimed
	}
	if _, claimed := pass(); claimed != 5 {
		t.Fatalf("first pass: claimed %d, want the 5 the object holds", claimed)
	}
	rt.st.Claimed = 2
	conflicts = 1
	if res, claimed := pass(); claimed != 5 || res.RequeueAfter != controllers.StaleCacheRetry {
		t.Fatalf("conflicted pass: claimed %d, result %+v; want 5 and a run again after %s", claimed, res, controllers.StaleCacheRetry)
	}
	for i := range 2 {
		if _, claimed := pass(); claimed != 7 {
			t.Fatalf("pass %d after the conflict: claimed %d, want 7", i, claimed)
		}
	}
}

// TestDeletedPoolGoes: a GatewayPool that is gone takes its pool from the runtime.
func TestDeletedPoolGoes(t *testing.T) {
	rt := &pooler{}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme.New()).Build(), Runtime: rt, Versions: versions}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	if len(rt.removed) != 1 || rt.removed[0] != "gone" {
		t.Fatalf("removed %v", rt.removed)
	}
}
