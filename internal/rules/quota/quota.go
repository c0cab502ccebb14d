// Package quota enforces limits that span objects (agents per workspace, domains per agent)
// under concurrent callers on any number of replicas. Slots are kept in the status of a holder
// object (the Workspace, the Agent), written with optimistic concurrency: the API server
// accepts one update per resourceVersion, so two callers can never both take the last slot.
//
// An agent's slot costs the same whatever the workspace holds (agents.go): the Workspace
// counts bound agents in status.agentSlots.used and lists only the creates and deletes in
// flight. A domain's slot is a Reservation in its Agent's status (at most MaxDomainsPerAgent).
package quota

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/statuspatch"
)

// ErrLimitReached: every slot is taken.
var ErrLimitReached = errors.New("limit reached")

// DefaultStaleAfter is how long a reservation without its object is kept before it is
// released (a caller that reserved and died before creating the object), unless the Limiter
// says otherwise.
const DefaultStaleAfter = 2 * time.Minute

// holder is an object whose status keeps slots.
type holder interface {
	// object is the pointer the API client reads into and writes from (holders are
	// value types, which the client refuses).
	object() client.Object
	// remembered: the Limiter keeps its last write of this holder as the base of the next
	// (Workspaces: few, written once per agent; Agents are many and written by others too).
	remembered() bool
}

// reservationHolder keeps its slots as a list of Reservations.
type reservationHolder interface {
	holder
	reservations() *[]agentsv1.Reservation
}

type agentHolder struct{ *agentsv1.Agent }

func (h agentHolder) object() client.Object { return h.Agent }

func (h agentHolder) remembered() bool { return false }

func (h agentHolder) reservations() *[]agentsv1.Reservation { return &h.Status.DomainReservations }

// Limiter reads holders from the API server (never a cache: a stale read only costs a
// conflict and a retry, but reading live keeps retries rare) and writes their status.
type Limiter struct {
	Reader client.Reader
	Writer client.Client
	// Clock dates reservations and tells when they are stale (nil: the real clock).
	Clock clock.PassiveClock
	// StaleAfter is how long a reservation (or a host claim) without its object is kept: longer
	// than any request takes from reserving to creating its object (0: DefaultStaleAfter).
	StaleAfter time.Duration
	// Agents, when set, is a cache of the agents: every reservation and release of an agent
	// slot then also settles what is due in the same write (SettleAgents' moves, judged on this
	// cache), so a burst of creates settles itself and the Workspace controller settles only
	// what is left once it is quiet (SettleAt).
	Agents client.Reader

	// queues gather this process's updates of one holder into batches, one write each (batch.go):
	// many workers reserving in one workspace would otherwise conflict with each other, or
	// wait in line for one write each. Other replicas are still kept apart by the
	// resourceVersion.
	queues sync.Map // client.ObjectKey -> *queue
	// last is the holder as this Limiter last wrote it, the base of its next update of that
	// holder: a single writer (the usual case) then needs no read per update. A copy another
	// writer has outdated costs one conflict and a live read.
	last sync.Map // client.ObjectKey -> client.Object
}

// Now is the time by Clock (the real clock when nil): reservations are dated with it and
// judged stale by it.
func (l *Limiter) Now() time.Time {
	if l.Clock == nil {
		return time.Now()
	}
	return l.Clock.Now()
}

// StaleAge is the Limiter's StaleAfter, or DefaultStaleAfter when unset.
func (l *Limiter) StaleAge() time.Duration {
	if l.StaleAfter > 0 {
		return l.StaleAfter
	}
	return DefaultStaleAfter
}

// Stale reports whether a reservation made at t is past StaleAge.
func (l *Limiter) Stale(t time.Time) bool { return l.Now().Sub(t) >= l.StaleAge() }

// ReserveDomain takes one of the agent's MaxDomainsPerAgent slots for domain.
func (l *Limiter) ReserveDomain(ctx context.Context, agent client.ObjectKey, domain string) error {
	return l.reserve(ctx, agent, func() holder { return agentHolder{&agentsv1.Agent{}} },
		func(holder) int { return agentsv1.MaxDomainsPerAgent }, domain)
}

// ReleaseDomain frees domain's slot on agent.
func (l *Limiter) ReleaseDomain(ctx context.Context, agent client.ObjectKey, domain string) error {
	return l.release(ctx, agent, func() holder { return agentHolder{&agentsv1.Agent{}} }, domain)
}

func (l *Limiter) reserve(ctx context.Context, key client.ObjectKey, newHolder func() holder, limit func(holder) int, name string) error {
	return l.update(ctx, key, newHolder, func(h holder) (bool, error) {
		res := h.(reservationHolder).reservations()
		for _, r := range *res {
			if r.Name == name {
				return false, nil
			}
		}
		if len(*res) >= limit(h) {
			return false, ErrLimitReached
		}
		*res = append(*res, agentsv1.Reservation{Name: name, Time: metav1.NewTime(l.Now())})
		return true, nil
	})
}

func (l *Limiter) release(ctx context.Context, key client.ObjectKey, newHolder func() holder, name string) error {
	err := l.update(ctx, key, newHolder, func(h holder) (bool, error) {
		res := h.(reservationHolder).reservations()
		for i, r := range *res {
			if r.Name == name {
				*res = append((*res)[:i:i], (*res)[i+1:]...)
				return true, nil
			}
		}
		return false, nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// PruneDomains drops the agent's domain slots that drop reports (the agent read from r). It
// writes once, with the read resourceVersion, so it never drops a slot taken concurrently; on
// a conflict it gives up (the caller retries later). It reports whether a slot was dropped.
func (l *Limiter) PruneDomains(ctx context.Context, r client.Reader, agent client.ObjectKey, drop func(agentsv1.Reservation) (bool, error)) (bool, error) {
	gone := false // an agent that is gone has no slot to drop
	wrote, err := statuspatch.Run(ctx, statuspatch.Loop{
		Read: func(ctx context.Context, _ int) (client.Object, error) {
			a := &agentsv1.Agent{}
			err := r.Get(ctx, agent, a)
			gone = apierrors.IsNotFound(err)
			return a, client.IgnoreNotFound(err)
		},
		Change: func(obj client.Object) (bool, error) {
			a := obj.(*agentsv1.Agent)
			if gone {
				return false, nil
			}
			kept := a.Status.DomainReservations[:0:0]
			for _, res := range a.Status.DomainReservations {
				gone, err := drop(res)
				if err != nil {
					return false, err
				}
				if !gone {
					kept = append(kept, res)
				}
			}
			changed := len(kept) != len(a.Status.DomainReservations)
			a.Status.DomainReservations = kept
			return changed, nil
		},
		Write: func(ctx context.Context, obj client.Object, patch client.Patch) error {
			return l.Writer.Status().Patch(ctx, obj, patch, client.FieldOwner(agentsv1.QuotaFieldManager))
		},
	})
	if apierrors.IsConflict(err) {
		return false, nil // the caller retries later
	}
	return wrote, err
}
