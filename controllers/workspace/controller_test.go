package workspace

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/quota"
	"github.com/agentplane/agentplane/internal/scheme"
)

var errRefused = errors.New("refused")

// TestReconcile: a pass makes the workspace's namespace and writes its counts, its phase and
// its Ready condition; a namespace that cannot be made is written (Ready says why) and is the
// pass's error; a pass that could not read its agents writes nothing; a workspace being
// deleted says so in its phase.
func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deleting bool
		funcs    interceptor.Funcs
		wantErr  bool
		writes   bool
		phase    string
		reason   string
		agents   int32
	}{
		{name: "a new workspace", writes: true, phase: Active, reason: "NamespaceReady", agents: 2},
		{name: "the namespace cannot be made", wantErr: true, writes: true, phase: "", reason: "NamespaceFailed", agents: 2,
			funcs: interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*corev1.Namespace); ok {
					return errRefused
				}
				return c.Create(ctx, obj, opts...)
			}}},
		{name: "the agents cannot be read", wantErr: true, writes: false,
			funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return errRefused
			}}},
		{name: "a workspace being deleted", deleting: true, writes: true, phase: Terminating},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "team", Generation: 3},
				Status: agentsv1.WorkspaceStatus{AgentSlots: agentsv1.AgentSlots{Used: 2}}}
			if tc.deleting {
				ws.DeletionTimestamp, ws.Finalizers = &metav1.Time{Time: time.Now()}, []string{"test/hold"}
			}
			bound := func(name string) *agentsv1.Agent {
				return &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Status: agentsv1.AgentStatus{HoldsSlot: true}}
			}
			writes := 0
			funcs := tc.funcs
			funcs.SubResourcePatch = func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				writes++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			}
			base := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(ws, bound("a"), bound("b")).WithStatusSubresource(ws).Build()
			c := interceptor.NewClient(base, funcs)
			r := &Reconciler{Client: c, Limiter: &quota.Limiter{Reader: c, Writer: c}}
			_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ws)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if (writes > 0) != tc.writes {
				t.Fatalf("%d status writes, want some: %v", writes, tc.writes)
			}
			got := &agentsv1.Workspace{}
			if err := base.Get(context.Background(), client.ObjectKeyFromObject(ws), got); err != nil {
				t.Fatal(err)
			}
			if !tc.writes {
				return
			}
			if got.Status.Phase != tc.phase {
				t.Errorf("phase %q, want %q", got.Status.Phase, tc.phase)
			}
			if tc.deleting {
				return
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
			if cond == nil || cond.Reason != tc.reason {
				t.Fatalf("Ready %+v, want %s", cond, tc.reason)
			}
			if got.Status.Agents != tc.agents || got.Status.Namespace != "team" || got.Status.ObservedGeneration != 3 || got.Status.AgentSlots.Used != 2 {
				t.Errorf("status %+v: want %d agents in namespace team, generation 3, the slots as they were", got.Status, tc.agents)
			}
		})
	}
}

// TestQuietPassWritesNothing: a second pass over a workspace that did not change sends no
// status write (and so triggers no further pass).
func TestQuietPassWritesNothing(t *testing.T) {
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "team", Generation: 1}}
	writes := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(ws).WithStatusSubresource(ws).Build(), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	r := &Reconciler{Client: c, Limiter: &quota.Limiter{Reader: c, Writer: c}}
	for range 2 {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ws)}); err != nil {
			t.Fatal(err)
		}
	}
	if writes != 1 {
		t.Fatalf("%d status writes in two passes, want 1", writes)
	}
}
