package quota

import (
	"context"
	"errors"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Storage quotas (files, snapshots, uploads) are counted in the Workspace's status.storage,
// written like the agent slots: every move with optimistic concurrency, so concurrent callers
// on any number of replicas never hold more than the quota.
//
//   - ReserveStorage puts a reservation (a name and the bytes it will write) in Pending before
//     a blob is written, refused once the settled count and the pending ones would exceed the
//     quota;
//   - SettleStorage moves it into Bytes and Objects once the object is recorded, with its
//     actual size (a snapshot reserves no bytes: its size is judged here, and refused if it
//     no longer fits); ReleaseStorage drops it when the write failed;
//   - FreeStorage gives back a deleted object's bytes;
//   - RecountStorage rebuilds the count from the objects themselves (the Workspace controller
//     runs it when a reservation went stale: a caller died between reserving and settling).
//
// A reservation costs one write whatever the workspace holds, and the Workspace's size depends
// on the writes in flight, never on its number of objects.

// ErrQuotaExceeded: the write does not fit in the workspace's storage quota.
var ErrQuotaExceeded = errors.New("storage quota exceeded")

// StorageStaleAfter is how long a storage reservation may wait for its settle: longer than any
// upload or archive takes (a snapshot's archive is bounded by 30 minutes).
const StorageStaleAfter = time.Hour

func storageCount(h holder, kind agentsv1.StorageKind) (*agentsv1.Workspace, *agentsv1.StorageCount) {
	ws := h.(workspaceHolder).Workspace
	return ws, ws.Status.Storage.Count(kind)
}

func indexOfStorage(res []agentsv1.StorageReservation, name string) int {
	return slices.IndexFunc(res, func(r agentsv1.StorageReservation) bool { return r.Name == name })
}

// ReserveStorage reserves room for one object of bytes bytes of kind in workspace ws, under the
// name of the write. Reserving again under a pending name is a no-op. It returns
// ErrQuotaExceeded when the object does not fit.
func (l *Limiter) ReserveStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, name string, bytes int64) error {
	return l.update(ctx, client.ObjectKey{Name: ws}, newWorkspaceHolder, func(h holder) (bool, error) {
		w, c := storageCount(h, kind)
		if indexOfStorage(c.Pending, name) >= 0 {
			return false, nil
		}
		if !w.EffectiveStorageQuota(kind).Fits(c, bytes, 1) {
			return false, ErrQuotaExceeded
		}
		c.Pending = append(c.Pending, agentsv1.StorageReservation{Name: name, Bytes: bytes, Time: metav1.NewTime(l.Now())})
		return true, nil
	})
}

// SettleStorage counts the object reserved under name, of bytes bytes, and drops its
// reservation. When bytes exceed what was reserved, the object must still fit: if it does not,
// the reservation is dropped, nothing is counted and ErrQuotaExceeded is returned (the caller
// removes what it wrote). A name no longer pending (a recount counted its object, or it went
// stale) is a no-op.
func (l *Limiter) SettleStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, name string, bytes int64) error {
	return l.update(ctx, client.ObjectKey{Name: ws}, newWorkspaceHolder, func(h holder) (bool, error) {
		w, c := storageCount(h, kind)
		i := indexOfStorage(c.Pending, name)
		if i < 0 {
			return false, nil
		}
		reserved := c.Pending[i]
		c.Pending = slices.Delete(c.Pending, i, i+1)
		if bytes > reserved.Bytes && !w.EffectiveStorageQuota(kind).Fits(c, bytes, 1) {
			return true, ErrQuotaExceeded
		}
		c.Bytes += bytes
		c.Objects++
		return true, nil
	})
}

// ReleaseStorage drops the reservation under name: its write failed or stored nothing new.
func (l *Limiter) ReleaseStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, name string) error {
	err := l.update(ctx, client.ObjectKey{Name: ws}, newWorkspaceHolder, func(h holder) (bool, error) {
		_, c := storageCount(h, kind)
		i := indexOfStorage(c.Pending, name)
		if i < 0 {
			return false, nil
		}
		c.Pending = slices.Delete(c.Pending, i, i+1)
		return true, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// FreeStorage gives back objects objects of bytes bytes of kind: they were deleted. The caller
// frees once per object (after the delete that removed it succeeded).
func (l *Limiter) FreeStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, bytes, objects int64) error {
	err := l.update(ctx, client.ObjectKey{Name: ws}, newWorkspaceHolder, func(h holder) (bool, error) {
		_, c := storageCount(h, kind)
		if c.Bytes == 0 && c.Objects == 0 {
			return false, nil
		}
		c.Bytes, c.Objects = max(c.Bytes-bytes, 0), max(c.Objects-objects, 0)
		return true, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// StaleStorageAt is when the first pending reservation of c turns stale (zero: none pending).
func StaleStorageAt(c *agentsv1.StorageCount) time.Time {
	var at time.Time
	for _, r := range c.Pending {
		if t := r.Time.Add(StorageStaleAfter); at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
}
