package platform

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	engineupgradectrl "github.com/agentplane/agentplane/controllers/engineupgrade"
	renderingrolloutctrl "github.com/agentplane/agentplane/controllers/renderingrollout"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// setupUpgrades registers the EngineUpgrade controller: engine upgrades of many agents in
// waves, each agent snapshotted first and rolled back when it is not healthy on the target.
func (p *Platform) setupUpgrades() error {
	mgr := p.Manager
	if err := (&engineupgradectrl.Reconciler{
		Client: mgr.GetClient(), Versions: p.versions,
		Recorder: eventRecorder(mgr, "agentplane-engineupgrade"), Metrics: metrics.Registry,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return p.setupRenderingRollout()
}

// setupRenderingRollout registers the RenderingRollout controller on a runtime whose
// gateways run a rendering of the manager's (kube), unless the platform applies new
// renderings at the next restart only.
func (p *Platform) setupRenderingRollout() error {
	r, ok := p.runtime.(runtime.PlatformRenderer)
	if !ok || p.opts.Runtime.RenderingRollout == RenderingNextRestart {
		return nil
	}
	mgr := p.Manager
	return (&renderingrolloutctrl.Reconciler{
		Client: mgr.GetClient(), Platform: r.PlatformRendering(),
		Recorder: eventRecorder(mgr, "agentplane-renderingrollout"),
	}).SetupWithManager(mgr)
}
