package snapshot

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/snapshotstore"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// complete records the stored archive obj in snap's status (done says how it got there) and
// writes the record that ties the archive to the Snapshot and its agent in storage
// (snapshotstore.Link), which lets a Snapshot a restore lost be re-created.
func (r *Reconciler) complete(ctx context.Context, snap *agentsv1.Snapshot, obj storage.Object, done string) {
	now := metav1.NewTime(r.Clock.Now())
	snap.Status.Phase, snap.Status.CID, snap.Status.Size, snap.Status.CompletedAt = agentsv1.SnapshotCompleted, obj.CID, obj.Size, &now
	meta.SetStatusCondition(&snap.Status.Conditions, computeReadyCondition(snap, metav1.ConditionTrue, agentsv1.ReasonArchived, fmt.Sprintf("%s %d bytes as %s", done, obj.Size, obj.CID)))
	if err := snapshotstore.WriteLink(ctx, r.Store, snap); err != nil {
		// The archive and the Snapshot are whole; only a lost Snapshot could not be relinked.
		log.FromContext(ctx).Error(err, "storing the snapshot's link record failed", "cid", obj.CID)
	}
}

// relink records an archive storage already holds (AnnotationSnapshotRelink), counted in the
// workspace's snapshot quota like a new one. It never deletes the archive: one that does not
// fit fails the Snapshot and stays in storage.
func (r *Reconciler) relink(ctx context.Context, snap *agentsv1.Snapshot, cid string) (ctrl.Result, error) {
	obj, err := r.Store.Stat(ctx, storage.SnapshotSpace(snap.Namespace), cid)
	switch {
	case errors.Is(err, storage.ErrUnavailable):
		r.pending(snap, agentsv1.ReasonStorageUnavailable, "storage is unreachable: "+err.Error())
		return ctrl.Result{RequeueAfter: r.backoff(snap)}, nil
	case err != nil:
		r.fail(snap, agentsv1.ReasonArchiveMissing, fmt.Sprintf("the archive %s to relink is not in storage: %v", cid, err))
		return ctrl.Result{}, nil
	}
	q, ok, err := r.reserve(ctx, snap)
	if !ok {
		return ctrl.Result{}, err
	}
	if err := q.settle(ctx, obj.Size); err != nil {
		r.overQuota(ctx, snap, nil) // nil: the archive stays
		return ctrl.Result{}, nil
	}
	r.complete(ctx, snap, obj, "relinked")
	r.event(snap, corev1.EventTypeNormal, "Relinked", "Relink", "archive %s of agent %s relinked (%d bytes)", obj.CID, snap.Spec.AgentRef.Name, obj.Size)
	return ctrl.Result{}, nil
}
