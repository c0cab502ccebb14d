package agent

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

const (
	// sendHoldMax bounds how long an agent's suspend waits for its sends: an agent that never
	// stops sending is suspended anyway.
	sendHoldMax = 30 * time.Second
	// sendHoldRetry is how soon a held suspend is tried again.
	sendHoldRetry = 250 * time.Millisecond
)

// holdSuspend reports whether the agent's suspend waits this pass, and when to look again: a
// call of the agent's that may change something on a chat network is in flight through the
// channel relay, or its gateway has not acked a message the relay delivered to it
// (ChannelRelay.Busy). A checkpoint closes the gateway's connections (the local runtime's
// CRIU runs with --tcp-close), and the engine, restored, retries a call whose answer it had
// not read: a message the network had already taken would be sent twice. A message delivered
// and not acked stays in the relay's inbox, and the relay wakes a sleeping agent for it at
// once: the suspend would be undone, and the message handled twice. The wait lasts at most
// sendHoldMax from its first pass.
func (r *Reconciler) holdSuspend(agent *agentsv1.Agent) (bool, time.Duration) {
	if r.ChannelRelay == nil || !r.ChannelRelay.Busy(client.ObjectKeyFromObject(agent)) {
		r.sendHolds.forget(agent.UID)
		return false, 0
	}
	now := r.Clock.Now()
	since, ok := r.sendHolds.load(agent.UID)
	if !ok {
		r.sendHolds.store(agent.UID, now)
		since = now
	}
	if now.Sub(since) >= sendHoldMax {
		return false, 0
	}
	return true, sendHoldRetry
}
