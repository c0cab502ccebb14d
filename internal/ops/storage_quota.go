package ops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// MsgStorageQuota answers a write that would take the workspace over a storage quota
// (spec.quotas): Forbidden like `Agent limit reached`, a limit of the account rather than of
// the request (TooLarge stays the per-request body limit).
const MsgStorageQuota = "Storage quota exceeded"

// Reservation is room held in a workspace's storage quota for one write in flight.
type Reservation struct {
	o    *Ops
	ctx  context.Context
	ws   string
	kind agentsv1.StorageKind
	name string // "": no quota is kept (operations without admission)
}

// ReserveStorage holds room for one object of bytes bytes of kind in workspace ws, before
// anything is written: Forbidden `Storage quota exceeded` when it does not fit. The
// reservation outlives the caller's context, so a client that goes away cannot leave it
// pending.
func (o *Ops) ReserveStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, bytes int64) (*Reservation, error) {
	res := &Reservation{o: o, ctx: context.WithoutCancel(ctx), ws: ws, kind: kind}
	l := o.storageLimiter()
	if l == nil {
		return res, nil
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	res.name = string(kind) + "-" + hex.EncodeToString(b)
	if err := l.ReserveStorage(ctx, ws, kind, res.name, bytes); err != nil {
		if errors.Is(err, quota.ErrQuotaExceeded) {
			return nil, Fail(Forbidden, MsgStorageQuota)
		}
		return nil, err
	}
	return res, nil
}

// Annotations mark the object the reservation's write records, so that a recount counts it
// once.
func (r *Reservation) Annotations() map[string]string {
	if r.name == "" {
		return nil
	}
	return map[string]string{agentsv1.AnnotationStorageReservation: r.name}
}

// Settle counts the object written, of bytes bytes. A settle that fails leaves the
// reservation pending: it holds the room until the Workspace controller's recount counts the
// object.
func (r *Reservation) Settle(bytes int64) {
	if r.name == "" {
		return
	}
	if err := r.o.storageLimiter().SettleStorage(r.ctx, r.ws, r.kind, r.name, bytes); err != nil {
		r.o.d.Log.Error(err, "settling a storage reservation failed; the recount will", "workspace", r.ws, "kind", r.kind)
	}
}

// Release gives the room back: the write failed or stored nothing new.
func (r *Reservation) Release() {
	if r.name == "" {
		return
	}
	if err := r.o.storageLimiter().ReleaseStorage(r.ctx, r.ws, r.kind, r.name); err != nil {
		r.o.d.Log.Error(err, "releasing a storage reservation failed; it frees itself once stale", "workspace", r.ws, "kind", r.kind)
	}
}

// FreeStorage gives back the room of one deleted object.
func (o *Ops) FreeStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, bytes int64) {
	l := o.storageLimiter()
	if l == nil {
		return
	}
	if err := l.FreeStorage(context.WithoutCancel(ctx), ws, kind, bytes, 1); err != nil {
		o.d.Log.Error(err, "freeing storage failed; the count is repaired by a recount", "workspace", ws, "kind", kind)
	}
}

// storageLimiter keeps the storage quotas (nil: none are kept).
func (o *Ops) storageLimiter() *quota.Limiter {
	if o.d.Admission == nil {
		return nil
	}
	return o.d.Admission.Limiter
}

// TallyUpload adds an upload of bytes bytes to the agent's tally (AnnotationUploads, metadata
// written with optimistic concurrency): the workspace's uploads count is the sum of its
// agents' tallies, so the agent's deletion gives them back. Call it before the upload's
// reservation is settled, so no recount sees the tally without the reservation.
func (o *Ops) TallyUpload(ctx context.Context, a *agentsv1.Agent, bytes int64) {
	if o.storageLimiter() == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		b, n := agentsv1.UploadTally(cur)
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, agentsv1.AnnotationUploads, agentsv1.FormatUploadTally(b+bytes, n+1))
		return o.d.Client.Patch(ctx, cur, patch)
	})
	if err != nil {
		o.d.Log.Error(err, "recording an upload in its agent's tally failed", "agent", a.Name)
	}
}
