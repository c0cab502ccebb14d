package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/quota"
)

// reservation is room held in a workspace's storage quota for one write in flight.
type reservation struct {
	s    *Server
	ctx  context.Context
	ws   string
	kind agentsv1.StorageKind
	name string // "": no quota is kept (a facade without admission)
}

// reserveStorage holds room for one object of bytes bytes of kind in workspace ws, before
// anything is written: 403 `Storage quota exceeded` when it does not fit. The reservation
// outlives the caller's request, so a client that goes away cannot leave it pending.
func (s *Server) reserveStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, bytes int64) (*reservation, error) {
	res := &reservation{s: s, ctx: context.WithoutCancel(ctx), ws: ws, kind: kind}
	l := s.storageLimiter()
	if l == nil {
		return res, nil
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	res.name = string(kind) + "-" + hex.EncodeToString(b)
	if err := l.ReserveStorage(ctx, ws, kind, res.name, bytes); err != nil {
		if errors.Is(err, quota.ErrQuotaExceeded) {
			return nil, errorf(http.StatusForbidden, msgStorageQuota)
		}
		return nil, err
	}
	return res, nil
}

// annotations mark the object the reservation's write records, so that a recount counts it
// once.
func (r *reservation) annotations() map[string]string {
	if r.name == "" {
		return nil
	}
	return map[string]string{agentsv1.AnnotationStorageReservation: r.name}
}

// settle counts the object written, of bytes bytes. A settle that fails leaves the
// reservation pending: it holds the room until the Workspace controller's recount counts the
// object.
func (r *reservation) settle(bytes int64) {
	if r.name == "" {
		return
	}
	if err := r.s.storageLimiter().SettleStorage(r.ctx, r.ws, r.kind, r.name, bytes); err != nil {
		r.s.opts.Log.Error(err, "settling a storage reservation failed; the recount will", "workspace", r.ws, "kind", r.kind)
	}
}

// release gives the room back: the write failed or stored nothing new.
func (r *reservation) release() {
	if r.name == "" {
		return
	}
	if err := r.s.storageLimiter().ReleaseStorage(r.ctx, r.ws, r.kind, r.name); err != nil {
		r.s.opts.Log.Error(err, "releasing a storage reservation failed; it frees itself once stale", "workspace", r.ws, "kind", r.kind)
	}
}

// freeStorage gives back the room of one deleted object.
func (s *Server) freeStorage(ctx context.Context, ws string, kind agentsv1.StorageKind, bytes int64) {
	l := s.storageLimiter()
	if l == nil {
		return
	}
	if err := l.FreeStorage(context.WithoutCancel(ctx), ws, kind, bytes, 1); err != nil {
		s.opts.Log.Error(err, "freeing storage failed; the count is repaired by a recount", "workspace", ws, "kind", kind)
	}
}

// storageLimiter keeps the storage quotas (nil: none are kept).
func (s *Server) storageLimiter() *quota.Limiter {
	if s.opts.Admission == nil {
		return nil
	}
	return s.opts.Admission.Limiter
}

// tallyUpload adds an upload of bytes bytes to the agent's tally (AnnotationUploads, metadata
// the facade writes with optimistic concurrency): the workspace's uploads count is the sum of
// its agents' tallies, so the agent's deletion gives them back. It runs before the upload's
// reservation is settled, so no recount sees the tally without the reservation.
func (s *Server) tallyUpload(ctx context.Context, a *agentsv1.Agent, bytes int64) {
	if s.storageLimiter() == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &agentsv1.Agent{}
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		b, o := agentsv1.UploadTally(cur)
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, agentsv1.AnnotationUploads, agentsv1.FormatUploadTally(b+bytes, o+1))
		return s.opts.Client.Patch(ctx, cur, patch)
	})
	if err != nil {
		s.opts.Log.Error(err, "recording an upload in its agent's tally failed", "agent", a.Name)
	}
}
