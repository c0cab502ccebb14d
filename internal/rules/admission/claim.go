package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// A claim is a coordination.k8s.io/v1 Lease in the system namespace named after the host:
// the API server accepts one create per name, so of any number of concurrent claimants on
// any number of replicas exactly one holds a host.
const (
	// ClaimKindDomain is agentsv1.LabelClaim's value on host claims.
	ClaimKindDomain = "domain"
)

// ErrHostTaken: another Domain (of another workspace, or another Domain of the same
// workspace) holds the host.
var ErrHostTaken = errors.New("host is taken")

// ErrClaimUndecided: the host's claim belongs to a request still in flight (its Domain does
// not exist yet, and the request keeps renewing it) that did not resolve within the
// claimant's wait. Whether the host ends up taken is unknown: answering "taken" would be
// wrong if that request then fails, so the claimant answers that it could not decide (503).
var ErrClaimUndecided = errors.New("host claim undecided")

// Claim is who holds a host.
type Claim struct {
	Host, Workspace string
	// Domain is the holder's `namespace/name`.
	Domain    string
	ClaimedAt time.Time
}

// ClaimName is the Lease name of host's claim: `domain-` and the first 40 hex digits of its
// SHA-256 (host names are longer than object names may be).
func ClaimName(host string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(host)))
	return "domain-" + hex.EncodeToString(sum[:])[:40]
}

// DomainKey is the `namespace/name` a claim records for d.
func DomainKey(d *agentsv1.Domain) string { return d.Namespace + "/" + d.Name }

// Lookup returns the claim on host, or nil when nobody holds it.
func Lookup(ctx context.Context, r client.Reader, systemNS, host string) (*Claim, error) {
	l := &coordinationv1.Lease{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: ClaimName(host)}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return claimOf(l), nil
}

func claimOf(l *coordinationv1.Lease) *Claim {
	a := l.Annotations
	c := &Claim{Host: a[agentsv1.AnnotationClaimHost], Workspace: a[agentsv1.AnnotationClaimWorkspace], Domain: a[agentsv1.AnnotationClaimDomain], ClaimedAt: l.CreationTimestamp.Time}
	if t, err := time.Parse(time.RFC3339, a[agentsv1.AnnotationClaimedAt]); err == nil {
		c.ClaimedAt = t
	}
	return c
}

// ClaimHost makes Domain domainKey (`namespace/name`) of workspace the holder of host.
// Claiming a host the same Domain holds is a no-op. A host held by any other Domain that
// exists answers an error wrapping ErrHostTaken; one whose claim stayed in flight past the
// wait below answers an error wrapping ErrClaimUndecided.
//
// A claim whose Domain does not exist belongs to a request still in flight (it claims, then
// takes a slot of its agent's limit, then creates its Domain and confirms the claim, or
// releases the claim when refused), or to one that died on the way (its process was killed,
// or the API server went away). ClaimHost waits for such a claim to resolve until it is
// InFlightWait old, then takes it over (with optimistic concurrency). So a refused request's
// claim released a moment later never makes this one answer "taken" (no serial order explains
// both refusals), and a dead request's claim blocks its name for InFlightWait at most, never
// with a 409. A slow request whose claim was taken over finds out when it confirms its claim
// (ConfirmClaim) and backs off. c should read from the API server, not a cache.
func ClaimHost(ctx context.Context, c client.Client, systemNS, host, workspace, domainKey string) error {
	host = strings.ToLower(host)
	now := time.Now()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: ClaimName(host), Namespace: systemNS,
			Labels:      map[string]string{agentsv1.LabelClaim: ClaimKindDomain, "app.kubernetes.io/part-of": "agentplane"},
			Annotations: claimAnnotations(host, workspace, domainKey, now),
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &domainKey},
	}
	// A claim in flight is waited for until it is InFlightWait old (then it is taken over),
	// however late in its life this claimant came. A claim its request keeps renewing (a slow
	// API server) or that is taken over again and again outlasts the bound: the claimant then
	// answers ErrClaimUndecided, never "taken" (that request may yet fail and leave the name
	// to nobody; the history test saw exactly that).
	deadline := now.Add(3 * InFlightWait)
	pause := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := c.Create(ctx, l.DeepCopy())
		if err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		cur := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(l), cur); err != nil {
			if apierrors.IsNotFound(err) && attempt < 50 {
				continue // released in between: create again
			}
			return err
		}
		held := claimOf(cur)
		if held.Domain == domainKey {
			return nil
		}
		state, err := holderState(ctx, c, held, time.Now(), InFlightWait)
		if err != nil {
			return err
		}
		switch {
		case state == holderStale:
			// Dated now: the next claimant waits for this claim as long as for any other.
			cur.Annotations = claimAnnotations(host, workspace, domainKey, time.Now())
			cur.Spec.HolderIdentity = &domainKey
			if err := c.Update(ctx, cur); err == nil {
				return nil
			} else if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return err
			}
		case state == holderInFlight && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
			pause = min(2*pause, 200*time.Millisecond)
		case state == holderInFlight:
			return fmt.Errorf("%w: %s is claimed by a request of workspace %s still in flight", ErrClaimUndecided, host, held.Workspace)
		default:
			return fmt.Errorf("%w: %s is held by workspace %s", ErrHostTaken, host, held.Workspace)
		}
		if attempt >= 200 {
			return fmt.Errorf("%w: %s is contended", ErrClaimUndecided, host)
		}
	}
}

// RenewClaim dates Domain domainKey's claim on host anew (an update with the claim's
// resourceVersion as read): a request on its way to its Domain renews its claim while it
// works, so however slow the API server makes it, nobody takes the claim over as a dead
// request's (and then answers "taken" for a host nobody ends up holding); a request that died
// stops renewing, and its claim goes stale InFlightWait after its last renewal. It returns an
// error wrapping ErrHostTaken when the claim is gone or another Domain's.
func RenewClaim(ctx context.Context, c client.Client, systemNS, host, domainKey string) error {
	host = strings.ToLower(host)
	cur := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: ClaimName(host)}, cur); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: the claim on %s is gone", ErrHostTaken, host)
		}
		return err
	}
	held := claimOf(cur)
	if held.Domain != domainKey {
		return fmt.Errorf("%w: %s is held by workspace %s", ErrHostTaken, host, held.Workspace)
	}
	cur.Annotations = claimAnnotations(host, held.Workspace, domainKey, time.Now())
	return c.Update(ctx, cur)
}

// InFlightWait is how long a claim whose Domain does not exist is waited for before it is
// taken over.
var InFlightWait = 5 * time.Second

// ConfirmClaim binds d's claim on host to d, which now exists: an update with the claim's
// resourceVersion as read, so a takeover decided while d did not exist yet (and written after
// this read) fails, and one written before shows here. It returns an error wrapping
// ErrHostTaken when d no longer holds the claim: d must then go.
func ConfirmClaim(ctx context.Context, c client.Client, systemNS, host string, d *agentsv1.Domain) error {
	key := client.ObjectKey{Namespace: systemNS, Name: ClaimName(strings.ToLower(host))}
	for attempt := 0; ; attempt++ {
		cur := &coordinationv1.Lease{}
		if err := c.Get(ctx, key, cur); err != nil {
			if apierrors.IsNotFound(err) {
				// Freed as stale by the Recounter while d did not exist yet: the host is free,
				// and d, which exists now, claims it as any claimant would.
				return ClaimHost(ctx, c, systemNS, host, d.Namespace, DomainKey(d))
			}
			return err
		}
		if held := claimOf(cur); held.Domain != DomainKey(d) {
			return fmt.Errorf("%w: %s was taken over by workspace %s", ErrHostTaken, host, held.Workspace)
		}
		now := metav1.NewMicroTime(time.Now())
		cur.Spec.RenewTime = &now
		err := c.Update(ctx, cur)
		if err == nil || !apierrors.IsConflict(err) || attempt >= 10 {
			return err
		}
	}
}

// holderStates: the claim's Domain exists (held), does not exist yet and the claim is young
// (in flight), or does not exist and the claim is older than the caller's bound (stale).
type holderStateKind int

const (
	holderHeld holderStateKind = iota
	holderInFlight
	holderStale
)

// holderState tells what the claim's Domain is.
func holderState(ctx context.Context, r client.Reader, held *Claim, now time.Time, staleAfter time.Duration) (holderStateKind, error) {
	ns, name, ok := strings.Cut(held.Domain, "/")
	if !ok {
		return holderStale, nil
	}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &agentsv1.Domain{})
	switch {
	case err == nil:
		return holderHeld, nil
	case !apierrors.IsNotFound(err):
		return holderHeld, err
	case now.Sub(held.ClaimedAt) >= staleAfter:
		return holderStale, nil
	}
	return holderInFlight, nil
}

func claimAnnotations(host, workspace, domainKey string, now time.Time) map[string]string {
	return map[string]string{
		agentsv1.AnnotationClaimHost: host, agentsv1.AnnotationClaimWorkspace: workspace, agentsv1.AnnotationClaimDomain: domainKey,
		agentsv1.AnnotationClaimedAt: now.UTC().Format(time.RFC3339Nano),
	}
}

// ReleaseHost drops the claim on host when Domain domainKey holds it (a claim another Domain
// took over is left alone).
func ReleaseHost(ctx context.Context, c client.Client, systemNS, host, domainKey string) error {
	cur := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: ClaimName(host)}, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if claimOf(cur).Domain != domainKey {
		return nil
	}
	pre := metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}
	err := c.Delete(ctx, cur, &client.DeleteOptions{Preconditions: &pre})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or changed hands in between (then it is not ours to release).
		return nil
	}
	return err
}

// Live returns c with reads going to r (the API server): claims must not be judged from a
// cache that may lag.
func Live(c client.Client, r client.Reader) client.Client {
	if r == nil {
		return c
	}
	return liveClient{Client: c, r: r}
}

type liveClient struct {
	client.Client
	r client.Reader
}

func (l liveClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.r.Get(ctx, key, obj, opts...)
}

func (l liveClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return l.r.List(ctx, list, opts...)
}
