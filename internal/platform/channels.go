package platform

import (
	channelctrl "github.com/agentplane/agentplane/controllers/channel"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
)

// setupChannels registers the Channel controller, which installs the channels' engine plugins
// through the runtime and reports their render (nothing to do without a runtime). The Agent
// controller renders them into the engine configs and watches Channels through
// controllers/agent.WatchChannels (setupControllers).
func (p *Platform) setupChannels() error {
	if p.runtime == nil {
		return nil
	}
	mgr := p.Manager
	return (&channelctrl.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: p.runtime, Engine: openclaw.New(),
		Recorder: eventRecorder(mgr, "agentplane-channel"),
	}).SetupWithManager(mgr)
}
