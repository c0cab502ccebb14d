package admission

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// DefaultRecountInterval is how often a Recounter runs unless told otherwise.
const DefaultRecountInterval = time.Minute

// Recounter frees, every Interval, what admission holds for objects that never appeared: the
// domain slots of agents whose Domain was never created, and the host claims whose Domain does
// not exist, once they are past the Limiter's StaleAge (a request that claimed or reserved and
// then died: its process was killed, or the API server went away). So a crash mid-create
// leaks nothing for longer than StaleAge plus one Interval. Agent slots are recounted by the
// Workspace controller, which requeues a workspace for exactly that moment.
//
// It runs on the leader only (a manager Runnable); every write is guarded by the read
// resourceVersion, so a slot or claim taken concurrently is never dropped.
type Recounter struct {
	Admitter *Admitter
	// Cache lists agents and Domains (a manager's cache); candidates found there are checked
	// again live before anything is freed.
	Cache    client.Reader
	Interval time.Duration
	Log      logr.Logger
}

// Start implements manager.Runnable: a recount each Interval until ctx ends.
func (r *Recounter) Start(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultRecountInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := r.Recount(ctx); err != nil && ctx.Err() == nil {
				r.Log.Error(err, "recount failed; next try in one interval")
			}
		}
	}
}

// Recount frees stale domain slots and stale host claims once.
func (r *Recounter) Recount(ctx context.Context) error {
	return errors.Join(r.recountDomainSlots(ctx), r.recountClaims(ctx))
}

func (r *Recounter) recountDomainSlots(ctx context.Context) error {
	var agents agentsv1.AgentList
	if err := r.Cache.List(ctx, &agents, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var errs []error
	for _, a := range agents.Items {
		stale := false
		for _, res := range a.Status.DomainReservations {
			if !r.Admitter.Limiter.Stale(res.Time.Time) {
				continue
			}
			err := r.Cache.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: res.Name}, &agentsv1.Domain{})
			if apierrors.IsNotFound(err) {
				stale = true
				break
			}
		}
		if !stale {
			continue
		}
		freed, err := PruneSlots(ctx, r.Admitter.reader(), client.ObjectKeyFromObject(&a), r.Admitter.Limiter)
		if err != nil {
			errs = append(errs, err)
		} else if freed {
			r.Log.Info("freed stale domain slots", "agent", client.ObjectKeyFromObject(&a))
		}
	}
	return errors.Join(errs...)
}

func (r *Recounter) recountClaims(ctx context.Context) error {
	a := r.Admitter
	var leases coordinationv1.LeaseList
	if err := a.reader().List(ctx, &leases, client.InNamespace(a.SystemNamespace), client.MatchingLabels{agentsv1.LabelClaim: ClaimKindDomain}); err != nil {
		return err
	}
	var errs []error
	for i := range leases.Items {
		l := &leases.Items[i]
		held := claimOf(l)
		state, err := holderState(ctx, a.reader(), held, a.Limiter.Now(), a.Limiter.StaleAge())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if state != holderStale {
			continue
		}
		pre := metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}
		err = a.Client.Delete(ctx, l, &client.DeleteOptions{Preconditions: &pre})
		switch {
		case err == nil:
			r.Log.Info("freed a stale host claim", "host", held.Host, "domain", held.Domain)
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
