// Package quota enforces limits that span objects (agents per workspace, domains per agent)
// under concurrent callers on any number of replicas. A slot is a Reservation in the status
// of a holder object (the Workspace, the Agent), written with optimistic concurrency: the API
// server accepts one update per resourceVersion, so two callers can never both take the last
// slot.
package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// ErrLimitReached: every slot is taken.
var ErrLimitReached = errors.New("limit reached")

// DefaultStaleAfter is how long a reservation without its object is kept before it is
// released (a caller that reserved and died before creating the object), unless the Limiter
// says otherwise.
const DefaultStaleAfter = 2 * time.Minute

// holder is an object whose status keeps reservations.
type holder interface {
	client.Object
	reservations() *[]agentsv1.Reservation
	// object is the pointer the API client reads into and writes from (holders are
	// value types, which the client refuses).
	object() client.Object
}

type workspaceHolder struct{ *agentsv1.Workspace }

func (h workspaceHolder) object() client.Object { return h.Workspace }

func (h workspaceHolder) reservations() *[]agentsv1.Reservation {
	return &h.Status.AgentReservations
}

type agentHolder struct{ *agentsv1.Agent }

func (h agentHolder) object() client.Object { return h.Agent }

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

	// locks queue this process's updates of one holder (many workers reserving in one
	// workspace would otherwise mostly conflict with each other); other replicas are still
	// kept apart by the resourceVersion.
	locks sync.Map // client.ObjectKey -> *sync.Mutex
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

// ReserveAgent takes a slot of workspace ws's agent limit for agent. Reserving twice for the
// same agent is a no-op. It returns ErrLimitReached when every slot is taken.
func (l *Limiter) ReserveAgent(ctx context.Context, ws, agent string) error {
	return l.reserve(ctx, client.ObjectKey{Name: ws}, func() holder { return workspaceHolder{&agentsv1.Workspace{}} },
		func(h holder) int { return h.(workspaceHolder).EffectiveAgentLimit() }, agent)
}

// ReleaseAgent frees agent's slot in workspace ws.
func (l *Limiter) ReleaseAgent(ctx context.Context, ws, agent string) error {
	return l.release(ctx, client.ObjectKey{Name: ws}, func() holder { return workspaceHolder{&agentsv1.Workspace{}} }, agent)
}

// ReserveDomain takes one of the agent's MaxDomainsPerAgent slots for domain.
func (l *Limiter) ReserveDomain(ctx context.Context, agent client.ObjectKey, domain string) error {
	return l.reserve(ctx, agent, func() holder { return agentHolder{&agentsv1.Agent{}} },
		func(holder) int { return agentsv1.MaxDomainsPerAgent }, domain)
}

// ReleaseDomain frees domain's slot on agent.
func (l *Limiter) ReleaseDomain(ctx context.Context, agent client.ObjectKey, domain string) error {
	return l.release(ctx, agent, func() holder { return agentHolder{&agentsv1.Agent{}} }, domain)
}

// PruneAgents releases reservations of workspace ws whose agent does not exist (exists says)
// and that are older than StaleAge.
func (l *Limiter) PruneAgents(ctx context.Context, ws string, exists func(name string) bool) error {
	return l.update(ctx, client.ObjectKey{Name: ws}, func() holder { return workspaceHolder{&agentsv1.Workspace{}} },
		func(h holder) (bool, error) {
			res := h.reservations()
			kept := (*res)[:0:0]
			for _, r := range *res {
				if exists(r.Name) || !l.Stale(r.Time.Time) {
					kept = append(kept, r)
				}
			}
			changed := len(kept) != len(*res)
			*res = kept
			return changed, nil
		})
}

func (l *Limiter) reserve(ctx context.Context, key client.ObjectKey, newHolder func() holder, limit func(holder) int, name string) error {
	return l.update(ctx, key, newHolder, func(h holder) (bool, error) {
		res := h.reservations()
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
		res := h.reservations()
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

// update reads the holder, applies mutate and writes the status with the read resourceVersion,
// retrying on conflicts with jittered backoff.
func (l *Limiter) update(ctx context.Context, key client.ObjectKey, newHolder func() holder, mutate func(holder) (bool, error)) error {
	mu, _ := l.locks.LoadOrStore(key, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	backoff := wait.Backoff{Duration: 5 * time.Millisecond, Factor: 1.5, Jitter: 1, Steps: 40, Cap: 500 * time.Millisecond}
	var lastErr error
	for backoff.Steps > 0 {
		h := newHolder()
		if err := l.Reader.Get(ctx, key, h.object()); err != nil {
			return err
		}
		changed, err := mutate(h)
		if err != nil || !changed {
			return err
		}
		err = l.Writer.Status().Update(ctx, h.object())
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff.Step()):
		}
	}
	return fmt.Errorf("quota on %s: too much contention: %w", key, lastErr)
}
