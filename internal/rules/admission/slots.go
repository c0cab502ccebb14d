package admission

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// PruneSlots releases the agent's domain slots whose Domain does not exist and that l judges
// stale (a caller that reserved and died before creating its Domain), both read from r. The
// write is the Limiter's (quota.Limiter.PruneDomains): with the read resourceVersion, so it
// never drops a slot taken concurrently; on a conflict it gives up (the caller retries later).
// It reports whether a slot was released.
func PruneSlots(ctx context.Context, r client.Reader, agent client.ObjectKey, l *quota.Limiter) (bool, error) {
	return l.PruneDomains(ctx, r, agent, func(res agentsv1.Reservation) (bool, error) {
		if !l.Stale(res.Time.Time) {
			return false, nil
		}
		err := r.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: res.Name}, &agentsv1.Domain{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
