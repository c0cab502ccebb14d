package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// errOverQuota: the archive grew past the room left in the workspace's snapshot quota.
var errOverQuota = errors.New("the archive is larger than the room left in the workspace's snapshot quota")

// snapshotQuota is a Snapshot's reservation in its workspace's snapshot quota (spec.quotas.
// snapshots): one object reserved before archiving, its bytes judged when it is settled, since
// an archive's size is known only once it is stored.
type snapshotQuota struct {
	r    *Reconciler
	snap *agentsv1.Snapshot
	// room is how many bytes the archive may take (<0: unbounded), read when it was reserved:
	// an archive beyond it is cut off while it streams.
	room int64
	held bool
	// cut is the writer that cut the archive off, if any.
	cut *quotaWriter
}

// reserveQuota reserves the snapshot's place before its archive is written. It returns
// quota.ErrQuotaExceeded when the workspace holds its most snapshots or bytes already. A
// namespace without a Workspace, or a reconciler without a Limiter, keeps no quota.
func (r *Reconciler) reserveQuota(ctx context.Context, snap *agentsv1.Snapshot) (*snapshotQuota, error) {
	q := &snapshotQuota{r: r, snap: snap, room: -1}
	if r.Quota == nil {
		return q, nil
	}
	err := r.Quota.ReserveStorage(ctx, snap.Namespace, agentsv1.StorageSnapshots, snap.Name, 0)
	switch {
	case apierrors.IsNotFound(err):
		return q, nil
	case err != nil:
		return nil, err
	}
	q.held = true
	ws := &agentsv1.Workspace{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: snap.Namespace}, ws); err == nil {
		bytes, _ := ws.Status.Storage.Snapshots.Taken()
		q.room = max(ws.EffectiveStorageQuota(agentsv1.StorageSnapshots).MaxBytes-bytes, 0)
	}
	return q, nil
}

// reserve is reserveQuota for a pass: ok is false when the pass ends here, the Snapshot failed
// for its quota (err nil) or the reservation failed (err).
func (r *Reconciler) reserve(ctx context.Context, snap *agentsv1.Snapshot) (q *snapshotQuota, ok bool, err error) {
	q, err = r.reserveQuota(ctx, snap)
	switch {
	case errors.Is(err, quota.ErrQuotaExceeded):
		r.overQuota(ctx, snap, nil)
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return q, true, nil
}

// limit bounds w by the room left: past it, writes fail with errOverQuota.
func (q *snapshotQuota) limit(w io.Writer) io.Writer {
	if q.room < 0 {
		return w
	}
	q.cut = &quotaWriter{w: w, left: q.room}
	return q.cut
}

// over reports whether the archive was cut off for the quota.
func (q *snapshotQuota) over() bool { return q.cut != nil && q.cut.over }

// settle counts the stored archive. It returns quota.ErrQuotaExceeded when the archive no
// longer fits (concurrent snapshots took the room meanwhile): the caller removes it.
func (q *snapshotQuota) settle(ctx context.Context, size int64) error {
	if !q.held {
		return nil
	}
	err := q.r.Quota.SettleStorage(ctx, q.snap.Namespace, agentsv1.StorageSnapshots, q.snap.Name, size)
	if err != nil && !errors.Is(err, quota.ErrQuotaExceeded) {
		// Stored and recorded all the same: the reservation holds the room until the Workspace
		// controller's recount counts the completed Snapshot.
		log.FromContext(ctx).Error(err, "settling the snapshot's quota reservation failed")
		return nil
	}
	return err
}

// release gives the reservation back: nothing was stored.
func (q *snapshotQuota) release(ctx context.Context) {
	if !q.held {
		return
	}
	if err := q.r.Quota.ReleaseStorage(ctx, q.snap.Namespace, agentsv1.StorageSnapshots, q.snap.Name); err != nil {
		log.FromContext(ctx).Error(err, "releasing the snapshot's quota reservation failed; it frees itself once stale")
	}
}

// overQuota fails snap for its quota and removes the archive it stored, unless another
// Snapshot or a template names it.
func (r *Reconciler) overQuota(ctx context.Context, snap *agentsv1.Snapshot, obj *storage.Object) {
	if obj != nil && obj.CID != "" {
		probe := snap.DeepCopy()
		probe.Status.CID = obj.CID
		if used, err := r.cidReferenced(ctx, probe); err == nil && !used {
			if err := r.Store.Delete(ctx, storage.SnapshotSpace(snap.Namespace), obj.CID); err != nil {
				log.FromContext(ctx).Error(err, "removing an archive over quota failed", "cid", obj.CID)
			}
		}
	}
	ws := &agentsv1.Workspace{}
	msg := "the workspace's snapshot quota (spec.quotas.snapshots) is full"
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: snap.Namespace}, ws); err == nil {
		l := ws.EffectiveStorageQuota(agentsv1.StorageSnapshots)
		c := ws.Status.Storage.Snapshots
		msg = fmt.Sprintf("%s: it holds %d of %d bytes and %d of %d snapshots", msg, c.Bytes, l.MaxBytes, c.Objects, l.MaxObjects)
	}
	r.fail(snap, agentsv1.ReasonQuotaExceeded, msg)
}

// freeQuota gives back a deleted completed Snapshot's room (called once, after its finalizer
// is removed).
func (r *Reconciler) freeQuota(ctx context.Context, snap *agentsv1.Snapshot) {
	if r.Quota == nil || snap.Status.Phase != agentsv1.SnapshotCompleted {
		return
	}
	if err := r.Quota.FreeStorage(ctx, snap.Namespace, agentsv1.StorageSnapshots, snap.Status.Size, 1); err != nil {
		log.FromContext(ctx).Error(err, "freeing the snapshot's quota failed")
	}
}

// quotaWriter fails once more than left bytes are written.
type quotaWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (q *quotaWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > q.left {
		q.over = true
		return 0, errOverQuota
	}
	q.left -= int64(len(b))
	return q.w.Write(b)
}
