package admission

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// ReserveAgent takes the agent's slot of its workspace's agent limit: a no-op when the agent
// is bound to one (status.holdsSlot) or, by the Cache when set, its reservation is pending, so
// the common case costs no round trip. Only a missing reservation goes to the API server
// through the Limiter, whose optimistic concurrency lets no two callers take the last slot.
// It returns an error matching ErrLimitReached when every slot is taken.
func (a *Admitter) ReserveAgent(ctx context.Context, agent *agentsv1.Agent) error {
	if agent.Status.HoldsSlot {
		return nil
	}
	if a.Cache != nil {
		ws := &agentsv1.Workspace{}
		if err := a.Cache.Get(ctx, client.ObjectKey{Name: agent.Namespace}, ws); err == nil &&
			slices.ContainsFunc(ws.Status.AgentSlots.Pending, func(r agentsv1.Reservation) bool { return r.Name == agent.Name }) {
			return nil
		}
	}
	return a.Limiter.ReserveAgent(ctx, agent.Namespace, agent.Name)
}

// ReleaseAgent gives back the agent's slot: its creation was refused, or it is being deleted
// (then the slot it is bound to, if any, is released once, by its UID).
func (a *Admitter) ReleaseAgent(ctx context.Context, agent *agentsv1.Agent) error {
	return a.Limiter.ReleaseAgent(ctx, agent.Namespace, agent.Name, agent.UID, agent.Status.HoldsSlot)
}

// Version returns the engine version the agent runs: spec.engine.version, or the platform's
// default when unset. The error matches ErrInvalidVersion when the platform does not offer it.
func (a *Admitter) Version(agent *agentsv1.Agent) (string, error) {
	version, offered := a.Versions.Resolve(agent.Spec.Engine.Version)
	if !offered {
		return version, fmt.Errorf("%w: %q", ErrInvalidVersion, version)
	}
	return version, nil
}
