package platform

import (
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/engine/openclaw"
)

// setupChannels registers the Channel controller, which writes channels into the agents'
// engine configs through the runtime (nothing to do without a runtime). The Agent controller
// watches Channels through controllers.WatchChannels (setupControllers) for their tokens.
func (p *Platform) setupChannels() error {
	if p.runtime == nil {
		return nil
	}
	mgr := p.Manager
	return (&controllers.ChannelReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: p.runtime, Engine: openclaw.New(),
		Recorder: mgr.GetEventRecorder("agentplane-channel"),
	}).SetupWithManager(mgr)
}
