package admission

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/quota"
)

// PruneSlots releases the agent's domain slots whose Domain does not exist and that l judges
// stale (a caller that reserved and died before creating its Domain). It writes with the read
// resourceVersion, so it never drops a slot taken concurrently; on a conflict it gives up (the
// caller retries later). It reports whether a slot was released.
func PruneSlots(ctx context.Context, r client.Reader, w client.Client, agent client.ObjectKey, l *quota.Limiter) (bool, error) {
	a := &agentsv1.Agent{}
	if err := r.Get(ctx, agent, a); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	kept := a.Status.DomainReservations[:0:0]
	for _, res := range a.Status.DomainReservations {
		if !l.Stale(res.Time.Time) {
			kept = append(kept, res)
			continue
		}
		err := r.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: res.Name}, &agentsv1.Domain{})
		switch {
		case err == nil:
			kept = append(kept, res)
		case !apierrors.IsNotFound(err):
			return false, err
		}
	}
	if len(kept) == len(a.Status.DomainReservations) {
		return false, nil
	}
	a.Status.DomainReservations = kept
	if err := w.Status().Update(ctx, a); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
