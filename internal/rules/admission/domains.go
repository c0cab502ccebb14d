package admission

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// ReserveDomain takes one of the agent's MaxDomainsPerAgent slots for Domain domain (a no-op
// when it holds one). When every slot is taken, slots whose Domain never appeared are freed
// (PruneSlots) and the reservation is tried once more; then the error matches
// ErrLimitReached. A missing agent answers the API server's NotFound.
func (a *Admitter) ReserveDomain(ctx context.Context, agent client.ObjectKey, domain string) error {
	err := a.Limiter.ReserveDomain(ctx, agent, domain)
	if errors.Is(err, ErrLimitReached) {
		if pruned, perr := PruneSlots(ctx, a.reader(), agent, a.Limiter); perr == nil && pruned {
			err = a.Limiter.ReserveDomain(ctx, agent, domain)
		}
	}
	return err
}

// ReleaseDomain frees Domain domain's slot on the agent.
func (a *Admitter) ReleaseDomain(ctx context.Context, agent client.ObjectKey, domain string) error {
	return a.Limiter.ReleaseDomain(ctx, agent, domain)
}

// ClaimHost makes d the holder of host cluster-wide (ClaimHost, read live). The error
// matches ErrHostTaken when another Domain holds it.
func (a *Admitter) ClaimHost(ctx context.Context, d *agentsv1.Domain, host string) error {
	return ClaimHost(ctx, a.live(), a.SystemNamespace, host, d.Namespace, DomainKey(d))
}

// RenewClaim dates d's claim on host anew while d is on its way (RenewClaim, read live).
func (a *Admitter) RenewClaim(ctx context.Context, d *agentsv1.Domain, host string) error {
	return RenewClaim(ctx, a.live(), a.SystemNamespace, host, DomainKey(d))
}

// ConfirmClaim binds d's claim on host to d once d exists (ConfirmClaim, read live). The error
// matches ErrHostTaken when the claim was taken over while d did not exist yet.
func (a *Admitter) ConfirmClaim(ctx context.Context, d *agentsv1.Domain, host string) error {
	return ConfirmClaim(ctx, a.live(), a.SystemNamespace, host, d)
}

// EnsureClaim is ClaimHost that first looks the claim up, so a Domain that holds its host
// already costs one read.
func (a *Admitter) EnsureClaim(ctx context.Context, d *agentsv1.Domain, host string) error {
	held, err := a.LookupClaim(ctx, host)
	if err != nil {
		return err
	}
	if held != nil && held.Domain == DomainKey(d) {
		return nil
	}
	return a.ClaimHost(ctx, d, host)
}

// ReleaseHost drops d's claim on host (a claim another Domain holds is left alone).
func (a *Admitter) ReleaseHost(ctx context.Context, d *agentsv1.Domain, host string) error {
	return ReleaseHost(ctx, a.live(), a.SystemNamespace, host, DomainKey(d))
}

// LookupClaim returns who holds host (nil: nobody), read live.
func (a *Admitter) LookupClaim(ctx context.Context, host string) (*Claim, error) {
	return Lookup(ctx, a.reader(), a.SystemNamespace, host)
}

// live is the Client with reads going to the API server.
func (a *Admitter) live() client.Client { return Live(a.Client, a.Reader) }
