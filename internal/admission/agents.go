package admission

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// ReserveAgent takes the agent's slot of its workspace's agent limit (a no-op when it holds
// one). The Cache, when set, answers the common case (already reserved) without a round
// trip; only a missing reservation goes to the API server through the Limiter, whose
// optimistic concurrency lets no two callers take the last slot. It returns an error
// matching ErrLimitReached when every slot is taken.
func (a *Admitter) ReserveAgent(ctx context.Context, agent *agentsv1.Agent) error {
	if a.Cache != nil {
		ws := &agentsv1.Workspace{}
		if err := a.Cache.Get(ctx, client.ObjectKey{Name: agent.Namespace}, ws); err == nil {
			for _, res := range ws.Status.AgentReservations {
				if res.Name == agent.Name {
					return nil
				}
			}
		}
	}
	return a.Limiter.ReserveAgent(ctx, agent.Namespace, agent.Name)
}

// ReleaseAgent frees the agent's slot (its creation failed, or it is deleted).
func (a *Admitter) ReleaseAgent(ctx context.Context, agent *agentsv1.Agent) error {
	return a.Limiter.ReleaseAgent(ctx, agent.Namespace, agent.Name)
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
