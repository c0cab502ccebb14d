package snapshot

import (
	"context"
	"errors"
	"sync"

	"github.com/agentplane/agentplane/internal/adapters/snapshotstore"
	"github.com/agentplane/agentplane/internal/rules/snapshots"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// applyRetention deletes the completed snapshots of snap's agent beyond the newest Retention
// (their finalizer then deletes the archives nothing else references). It reads live: it runs
// when a snapshot completes, and a lagging cache would miss the newest ones.
func (r *Reconciler) applyRetention(ctx context.Context, snap *agentsv1.Snapshot) error {
	keep := r.Retention
	if keep == 0 {
		keep = DefaultSnapshotRetention
	}
	if keep < 0 {
		return nil
	}
	var list agentsv1.SnapshotList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(snap.Namespace), client.MatchingFields{agentsv1.IndexAgentRef: snap.Spec.AgentRef.Name}); err != nil {
		return err
	}
	history := snapshots.Completed(list.Items, snap.Spec.AgentRef.Name)
	if len(history) <= keep {
		return nil
	}
	for i := keep; i < len(history); i++ {
		old := &history[i]
		err := r.Delete(ctx, old, client.Preconditions{UID: &old.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
		if err == nil {
			r.event(old, corev1.EventTypeNormal, "Pruned", "Retention",
				"deleted: agent %s keeps its %d newest snapshots", old.Spec.AgentRef.Name, keep)
		}
	}
	return nil
}

// ownerGone reports whether the Agent snap was archived from (its owner reference) no longer
// exists; a Snapshot without such a reference (never adopted) is never orphaned.
func (r *Reconciler) ownerGone(ctx context.Context, snap *agentsv1.Snapshot) (bool, error) {
	for _, ref := range snap.OwnerReferences {
		if ref.Kind != agentsv1.KindAgent || ref.APIVersion != agentsv1.GroupVersion.String() {
			continue
		}
		agent := &agentsv1.Agent{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: snap.Namespace, Name: ref.Name}, agent)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return agent.UID != ref.UID, nil
	}
	return false, nil
}

// reconcileDelete deletes the Snapshot's archive unless another live Snapshot of the
// workspace or an AgentTemplate names the same CID, then lets the Snapshot go. While storage
// is unreachable it retries with backoff.
func (r *Reconciler) reconcileDelete(ctx context.Context, snap *agentsv1.Snapshot) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(snap, agentsv1.SnapshotFinalizer) {
		return ctrl.Result{}, nil
	}
	if snap.Status.CID != "" && r.Store != nil {
		space := storage.SnapshotSpace(snap.Namespace)
		unlock := r.locks.lock(space)
		defer unlock()
		used, err := r.cidReferenced(ctx, snap)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !used {
			err := r.Store.Delete(ctx, space, snap.Status.CID)
			switch {
			case errors.Is(err, storage.ErrUnavailable):
				log.FromContext(ctx).Info("snapshot storage unreachable, will retry the delete", "error", err.Error())
				return ctrl.Result{RequeueAfter: controllers.RetryWait(r.Clock.Now().Sub(snap.DeletionTimestamp.Time), r.RetryMin, r.RetryMax)}, nil
			case err != nil && !errors.Is(err, storage.ErrInvalid):
				return ctrl.Result{}, err
			}
		}
		if err := snapshotstore.DeleteLink(ctx, r.Store, snap); err != nil {
			// A record left behind names a Snapshot that is gone; `agentplane doctor` relinks
			// only records whose archive storage still holds.
			log.FromContext(ctx).Error(err, "removing the snapshot's link record failed")
		}
	}
	controllerutil.RemoveFinalizer(snap, agentsv1.SnapshotFinalizer)
	if err := r.Update(ctx, snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The update that let the Snapshot go gives its room back, once.
	r.freeQuota(ctx, snap)
	return ctrl.Result{}, nil
}

// cidReferenced reports whether another live Snapshot of the namespace or any AgentTemplate
// names snap's CID (read live: a stale cache must not let a shared archive go).
func (r *Reconciler) cidReferenced(ctx context.Context, snap *agentsv1.Snapshot) (bool, error) {
	var snaps agentsv1.SnapshotList
	if err := r.APIReader.List(ctx, &snaps, client.InNamespace(snap.Namespace)); err != nil {
		return false, err
	}
	for i := range snaps.Items {
		o := &snaps.Items[i]
		if o.UID != snap.UID && o.DeletionTimestamp == nil && storage.SameCID(o.Status.CID, snap.Status.CID) {
			return true, nil
		}
	}
	var templates agentsv1.AgentTemplateList
	if err := r.APIReader.List(ctx, &templates); err != nil {
		return false, err
	}
	for i := range templates.Items {
		if storage.SameCID(templates.Items[i].Spec.SnapshotCID, snap.Status.CID) {
			return true, nil
		}
	}
	return false, nil
}

// spaceLocks serialise, per storage space, deleting archives against storing them: stores
// share the lock, a delete (reference check, then Delete) takes it alone. The controller is
// the only writer of snapshot archives (leader election keeps it to one process).
type spaceLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.RWMutex
}

func (l *spaceLocks) get(space string) *sync.RWMutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[string]*sync.RWMutex{}
	}
	m := l.locks[space]
	if m == nil {
		m = &sync.RWMutex{}
		l.locks[space] = m
	}
	return m
}

func (l *spaceLocks) rlock(space string) func() {
	m := l.get(space)
	m.RLock()
	return m.RUnlock
}

func (l *spaceLocks) lock(space string) func() {
	m := l.get(space)
	m.Lock()
	return m.Unlock
}
