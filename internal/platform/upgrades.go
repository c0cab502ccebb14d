package platform

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	engineupgradectrl "github.com/agentplane/agentplane/controllers/engineupgrade"
)

// setupUpgrades registers the EngineUpgrade controller: engine upgrades of many agents in
// waves, each agent snapshotted first and rolled back when it is not healthy on the target.
func (p *Platform) setupUpgrades() error {
	mgr := p.Manager
	return (&engineupgradectrl.Reconciler{
		Client: mgr.GetClient(), Versions: p.versions,
		Recorder: mgr.GetEventRecorder("agentplane-engineupgrade"), Metrics: metrics.Registry,
	}).SetupWithManager(mgr)
}
