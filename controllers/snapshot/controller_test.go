package snapshot

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/scheme"
)

// archiver is a runtime whose archive of a home is what the test says.
type archiver struct {
	runtime.Runtime
	err error
}

func (a archiver) ArchiveWorkspace(_ context.Context, _ *agentsv1.Agent, w io.Writer) error {
	if a.err != nil {
		return a.err
	}
	_, err := io.WriteString(w, "the home's tar")
	return err
}

// downStore is storage that cannot be reached.
type downStore struct{ storage.Store }

func (downStore) Put(context.Context, string, io.Reader) (storage.Object, error) {
	return storage.Object{}, storage.ErrUnavailable
}

// TestReconcile: a pending Snapshot's pass archives its agent's home once and records the
// outcome in its status, in one write: completed with the archive's CID, failed with the
// reason (no agent, no storage, the archive failed), or pending while storage or the agent's
// home cannot be reached (looked at again later, the generation not acknowledged while storage
// is down). The Snapshot is adopted (finalizer, the agent as owner, the agent label) on the
// way.
func TestReconcile(t *testing.T) {
	store, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		noAgent bool
		store   storage.Store
		rt      runtime.Runtime
		phase   agentsv1.SnapshotPhase
		reason  string
		acked   bool
		requeue bool
	}{
		{name: "archived", store: store, rt: archiver{}, phase: agentsv1.SnapshotCompleted, reason: agentsv1.ReasonArchived, acked: true},
		{name: "no agent", noAgent: true, store: store, rt: archiver{}, phase: agentsv1.SnapshotFailed, reason: agentsv1.ReasonAgentNotFound, acked: true},
		{name: "no storage", rt: archiver{}, phase: agentsv1.SnapshotFailed, reason: agentsv1.ReasonStorageNotConfigured, acked: true},
		{name: "storage down", store: downStore{store}, rt: archiver{}, phase: agentsv1.SnapshotPending, reason: agentsv1.ReasonStorageUnavailable, requeue: true},
		{name: "the agent is not running", store: store, rt: archiver{err: runtime.ErrNotRunning}, phase: agentsv1.SnapshotPending, reason: agentsv1.ReasonWaitingForAgent, acked: true, requeue: true},
		{name: "the archive fails", store: store, rt: archiver{err: errors.New("tar: disk error")}, phase: agentsv1.SnapshotFailed, reason: agentsv1.ReasonArchiveFailed, acked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := &agentsv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "s1", Generation: 1},
				Spec: agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: "bot"}}}
			objs := []client.Object{snap}
			if !tc.noAgent {
				objs = append(objs, &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "bot", UID: "u-bot"}})
			}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(snap).Build()
			r := &Reconciler{Client: c, APIReader: c, Runtime: tc.rt, Store: tc.store,
				Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(snap)})
			if err != nil {
				t.Fatal(err)
			}
			got := &agentsv1.Snapshot{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(snap), got); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, agentsv1.ConditionReady)
			if got.Status.Phase != tc.phase || cond == nil || cond.Reason != tc.reason {
				t.Fatalf("phase %s, Ready %+v; want %s, %s", got.Status.Phase, cond, tc.phase, tc.reason)
			}
			if acked := got.Status.ObservedGeneration == 1; acked != tc.acked {
				t.Errorf("observedGeneration %d: acknowledged %v, want %v", got.Status.ObservedGeneration, acked, tc.acked)
			}
			if (res.RequeueAfter > 0) != tc.requeue {
				t.Errorf("result %+v, want a requeue: %v", res, tc.requeue)
			}
			if tc.phase == agentsv1.SnapshotCompleted && (got.Status.CID == "" || got.Status.Size != int64(len("the home's tar"))) {
				t.Errorf("completed with CID %q, size %d", got.Status.CID, got.Status.Size)
			}
			if !controllerutil.ContainsFinalizer(got, agentsv1.SnapshotFinalizer) || got.Annotations[agentsv1.AnnotationSnapshotRequestedAt] == "" {
				t.Errorf("not adopted: finalizers %v, annotations %v", got.Finalizers, got.Annotations)
			}
			if !tc.noAgent && (got.Labels[agentsv1.LabelAgent] != "bot" || len(got.OwnerReferences) != 1) {
				t.Errorf("agent label %v, owners %v", got.Labels, got.OwnerReferences)
			}
		})
	}
}

// TestFinishedIsNeverArchivedAgain: a completed Snapshot's pass archives nothing and writes no
// status; once its agent is gone, it goes too.
func TestFinishedIsNeverArchivedAgain(t *testing.T) {
	snap := &agentsv1.Snapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "s1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: agentsv1.GroupVersion.String(), Kind: "Agent", Name: "bot", UID: "u-bot"}}},
		Spec:   agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: "bot"}},
		Status: agentsv1.SnapshotStatus{Phase: agentsv1.SnapshotCompleted, CID: "c"}}
	agent := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "bot", UID: "u-bot"}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(snap, agent).WithStatusSubresource(snap).
		WithIndex(&agentsv1.Snapshot{}, agentsv1.IndexAgentRef, func(o client.Object) []string {
			return []string{o.(*agentsv1.Snapshot).Spec.AgentRef.Name}
		}).Build()
	r := &Reconciler{Client: c, APIReader: c, Runtime: archiver{err: errors.New("archived again")}, Store: downStore{},
		Clock: clocktesting.NewFakePassiveClock(time.Now())}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(snap)}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := &agentsv1.Snapshot{}
	if err := c.Get(context.Background(), req.NamespacedName, got); err != nil || got.Status.Phase != agentsv1.SnapshotCompleted || got.ResourceVersion != "999" {
		t.Fatalf("after a pass: %v, phase %s, resourceVersion %s (want untouched)", err, got.Status.Phase, got.ResourceVersion)
	}
	if err := c.Delete(context.Background(), agent); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), req.NamespacedName, got); err == nil {
		t.Fatalf("the snapshot of an agent that is gone is still there: %+v", got.Status)
	}
}
