package skill

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/scheme"
)

// statStore answers Stat with what the test says; it holds nothing else.
type statStore struct {
	storage.Store
	obj storage.Object
	err error
}

func (s statStore) Stat(context.Context, string, string) (storage.Object, error) { return s.obj, s.err }
func (statStore) Put(context.Context, string, io.Reader) (storage.Object, error) {
	panic("the Skill controller never stores")
}

// TestReconcile: a pass computes which agents attach the skill and whether its bundle is in
// storage, acknowledges the generation once the bundle was checked, and looks again later
// while storage cannot be reached (the generation not acknowledged then).
func TestReconcile(t *testing.T) {
	agent := func(name, cid string, deleting bool) *agentsv1.Agent {
		a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name},
			Spec: agentsv1.AgentSpec{Skills: []agentsv1.AgentSkill{{CID: cid}}}}
		if deleting {
			a.DeletionTimestamp, a.Finalizers = &metav1.Time{Time: time.Now()}, []string{"test/hold"}
		}
		return a
	}
	for _, tc := range []struct {
		name    string
		store   storage.Store
		reason  string
		ready   metav1.ConditionStatus
		size    int64
		acked   bool
		requeue time.Duration
	}{
		{name: "no storage", store: nil, reason: agentsv1.ReasonStorageNotConfigured, ready: metav1.ConditionFalse, acked: true},
		{name: "the bundle is stored", store: statStore{obj: storage.Object{CID: "c1", Size: 42}}, reason: agentsv1.ReasonSkillStored, ready: metav1.ConditionTrue, size: 42, acked: true},
		{name: "the bundle is missing", store: statStore{err: storage.ErrNotFound}, reason: agentsv1.ReasonSkillBundleMissing, ready: metav1.ConditionFalse, acked: true},
		{name: "storage unreachable", store: statStore{err: storage.ErrUnavailable}, reason: agentsv1.ReasonStorageUnavailable, ready: metav1.ConditionFalse, requeue: 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sk := &agentsv1.Skill{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "s", Generation: 2},
				Spec: agentsv1.SkillSpec{CID: "c1"}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).
				WithObjects(sk, agent("b", "c1", false), agent("a", "c1", false), agent("gone", "c1", true), agent("other", "c2", false)).
				WithStatusSubresource(sk).
				WithIndex(&agentsv1.Agent{}, agentsv1.IndexAgentSkillCID, func(o client.Object) []string {
					var out []string
					for _, s := range o.(*agentsv1.Agent).Spec.Skills {
						out = append(out, s.CID)
					}
					return out
				}).Build()
			r := &Reconciler{Client: c, Store: tc.store, RetryAfter: 7 * time.Second}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sk)})
			if err != nil {
				t.Fatal(err)
			}
			got := &agentsv1.Skill{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(sk), got); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
			if cond == nil || cond.Status != tc.ready || cond.Reason != tc.reason {
				t.Fatalf("Ready %+v, want %s %s", cond, tc.ready, tc.reason)
			}
			if len(got.Status.AttachedTo) != 2 || got.Status.AttachedTo[0] != "a" || got.Status.AttachedTo[1] != "b" {
				t.Errorf("attachedTo %v, want [a b] (sorted, not the agent being deleted nor another skill's)", got.Status.AttachedTo)
			}
			if got.Status.Size != tc.size {
				t.Errorf("size %d, want %d", got.Status.Size, tc.size)
			}
			if acked := got.Status.ObservedGeneration == 2; acked != tc.acked {
				t.Errorf("observedGeneration %d: acknowledged %v, want %v", got.Status.ObservedGeneration, acked, tc.acked)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("result %+v, want a requeue after %s", res, tc.requeue)
			}
		})
	}
}

// TestFailedPassWritesNothing: a pass that could not list the agents returns the error and
// writes no status (its conditions would be half computed).
func TestFailedPassWritesNothing(t *testing.T) {
	sk := &agentsv1.Skill{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "s", Generation: 2}, Spec: agentsv1.SkillSpec{CID: "c1"}}
	writes := 0
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(sk).WithStatusSubresource(sk).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("cache not synced")
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	r := &Reconciler{Client: c, Store: statStore{obj: storage.Object{CID: "c1", Size: 1}}}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sk)}); err == nil {
		t.Fatal("no error from a pass that could not list")
	}
	if writes != 0 {
		t.Fatalf("%d status writes after a failed pass", writes)
	}
}
