package platform

import (
	"github.com/agentplane/agentplane/controllers"
)

// setupControllers registers every controller with the manager.
func (p *Platform) setupControllers() error {
	mgr := p.Manager
	if err := (&controllers.WorkspaceReconciler{Client: mgr.GetClient(), Limiter: p.limiter}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&controllers.AgentSecretReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sealer: p.sealer}).SetupWithManager(mgr); err != nil {
		return err
	}
	return nil
}
