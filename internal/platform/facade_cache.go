package platform

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// warmFacadeCache registers the informers of every kind the REST facade reads through the
// manager's cache (auth: ApiKeys and Workspaces; waits: Agents, Domains, Snapshots; gateway-token
// Secrets are registered by their index). The manager starts and syncs registered informers
// before the facade serves. An informer first asked for by a request would instead be created
// then, and the request would wait for its sync without bound: forever, while the API server
// is unreachable, on a replica (or a kind) that had not served yet.
func (p *Platform) warmFacadeCache(ctx context.Context) error {
	for _, obj := range []client.Object{&agentsv1.ApiKey{}, &agentsv1.Workspace{}, &agentsv1.Agent{}, &agentsv1.Domain{}, &agentsv1.Snapshot{}} {
		if _, err := p.Manager.GetCache().GetInformer(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}
