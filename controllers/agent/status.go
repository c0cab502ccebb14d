package agent

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// applyObserved rebuilds the agent's status from what the runtime observes.
func applyObserved(agent *agentsv1.Agent, o runtime.Observed, now time.Time) {
	agent.Status.Phase = phaseFor(o)
	agent.Status.Endpoint = o.Endpoint
	agent.Status.EngineVersion = o.EngineVersion
	agent.Status.Restarts = o.Restarts
	if o.Rendering != "" { // a runtime with renderings (an Observed made here keeps them)
		agent.Status.Rendering, agent.Status.RenderingTarget = agentsv1.RenderingCurrent, o.Rendering
		if o.RenderingOutdated {
			agent.Status.Rendering = agentsv1.RenderingOutdated
		}
	}
	if t := agent.Spec.RestartRequestedAt; t != nil && o.Phase != runtime.PhaseStarting {
		agent.Status.LastRestartAt = t.DeepCopy()
	}
	meta.SetStatusCondition(&agent.Status.Conditions, computeProvisionedCondition(agent))
	meta.SetStatusCondition(&agent.Status.Conditions, computeGatewayReadyCondition(agent, o))
}

// computeReadyCondition is the agent's summary: True when the runtime holds it, no restore
// the spec asks for is outstanding and the gateway answers (or the agent is stopped, as its
// spec asks); otherwise False with the reason of the first condition that is not.
func computeReadyCondition(agent *agentsv1.Agent) metav1.Condition {
	c := metav1.Condition{Type: agentsv1.ConditionReady, ObservedGeneration: agent.Generation, Status: metav1.ConditionFalse}
	prov := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentProvisioned)
	restored := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentSnapshotRestored)
	gw := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentGatewayReady)
	switch {
	case prov == nil:
		c.Reason, c.Message = agentsv1.ReasonProvisioning, "the agent is being provisioned"
	case prov.Status != metav1.ConditionTrue:
		c.Reason, c.Message = prov.Reason, prov.Message
	case restorePending(agent) && restored != nil && restored.Status == metav1.ConditionFalse:
		c.Reason, c.Message = restored.Reason, restored.Message
	case restorePending(agent):
		c.Reason, c.Message = agentsv1.ReasonRestoring, "the workspace is being restored from snapshot "+agent.Spec.DesiredSnapshot
	case gw == nil:
		c.Reason, c.Message = agentsv1.ReasonStarting, "the gateway is starting"
	case gw.Status == metav1.ConditionTrue || agent.Spec.Stopped && gw.Reason == agentsv1.ReasonStopped || asleep(agent, gw):
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, gw.Reason, gw.Message
	default:
		c.Reason, c.Message = gw.Reason, gw.Message
	}
	return c
}

// applySleeping marks a sleeping agent whose gateway the runtime stopped: phase suspended,
// and GatewayReady says why it does not run (the Suspended condition's reason and message).
func applySleeping(agent *agentsv1.Agent) {
	c := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.ConditionSuspended)
	if c == nil || c.Status != metav1.ConditionTrue {
		return
	}
	agent.Status.Phase = agentsv1.AgentSuspended
	meta.SetStatusCondition(&agent.Status.Conditions, metav1.Condition{
		Type: agentsv1.AgentGatewayReady, Status: metav1.ConditionFalse, ObservedGeneration: agent.Generation,
		Reason: c.Reason, Message: c.Message,
	})
}

// asleep: the gateway does not run because the agent sleeps, as its spec or idle policy asks.
func asleep(agent *agentsv1.Agent, gw *metav1.Condition) bool {
	return agent.Status.Phase == agentsv1.AgentSuspended && gw.Status == metav1.ConditionFalse &&
		(gw.Reason == agentsv1.ReasonSuspendedBySpec || gw.Reason == agentsv1.ReasonIdle)
}

// restoreRetrying: a restore the spec asks for failed and is retried (storage unreachable,
// a failed restore, a workspace not reachable yet): the pass did not converge.
func restoreRetrying(agent *agentsv1.Agent) bool {
	if !restorePending(agent) {
		return false
	}
	c := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentSnapshotRestored)
	if c == nil || c.Status != metav1.ConditionFalse {
		return false
	}
	switch c.Reason {
	case agentsv1.ReasonStorageUnavailable, agentsv1.ReasonRestoreFailed, agentsv1.ReasonWaitingForAgent:
		return true
	}
	return false
}

// phaseFor maps the runtime's observation onto the hosted service's three words.
func phaseFor(o runtime.Observed) agentsv1.AgentPhase {
	switch o.Phase {
	case runtime.PhaseRunning:
		return agentsv1.AgentRunning
	case runtime.PhaseStarting:
		return agentsv1.AgentStarting
	default:
		return agentsv1.AgentNotRunning
	}
}

// computeProvisionedCondition: the runtime accepted the agent.
func computeProvisionedCondition(agent *agentsv1.Agent) metav1.Condition {
	return metav1.Condition{
		Type: agentsv1.AgentProvisioned, Status: metav1.ConditionTrue, ObservedGeneration: agent.Generation,
		Reason: agentsv1.ReasonProvisioned, Message: "the runtime holds the agent's gateway",
	}
}

// computeGatewayReadyCondition: the gateway answers its health check.
func computeGatewayReadyCondition(agent *agentsv1.Agent, o runtime.Observed) metav1.Condition {
	c := metav1.Condition{Type: agentsv1.AgentGatewayReady, ObservedGeneration: agent.Generation, Status: metav1.ConditionFalse}
	switch o.Phase {
	case runtime.PhaseRunning:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, agentsv1.ReasonHealthy, "the gateway answers its health check"
	case runtime.PhaseStarting:
		// The runtime's reason says what it waits for (ContainerCreating, Unschedulable,
		// NodeNotReady, a restart after a crash, ...).
		c.Reason, c.Message = agentsv1.ReasonStarting, "the gateway is starting"
		if o.Reason != "" {
			c.Reason = o.Reason
		}
	case runtime.PhaseStopped:
		c.Reason, c.Message = agentsv1.ReasonStopped, "the agent is stopped"
	default:
		c.Reason, c.Message = agentsv1.ReasonCrashed, "the gateway crashed"
		if o.Reason != "" {
			c.Reason = o.Reason
		}
	}
	if o.Message != "" {
		c.Message = o.Message
	}
	return c
}

// setProvisionFailure records that the agent could not be provisioned.
func setProvisionFailure(agent *agentsv1.Agent, reason, message string, _ time.Time) {
	agent.Status.Phase = agentsv1.AgentNotRunning
	meta.SetStatusCondition(&agent.Status.Conditions, metav1.Condition{
		Type: agentsv1.AgentProvisioned, Status: metav1.ConditionFalse, ObservedGeneration: agent.Generation,
		Reason: reason, Message: message,
	})
	meta.SetStatusCondition(&agent.Status.Conditions, metav1.Condition{
		Type: agentsv1.AgentGatewayReady, Status: metav1.ConditionFalse, ObservedGeneration: agent.Generation,
		Reason: reason, Message: message,
	})
}

// gatewayMessage is the GatewayReady condition's message.
func gatewayMessage(agent *agentsv1.Agent) string {
	if c := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentGatewayReady); c != nil {
		return c.Message
	}
	return ""
}

func phaseEventSuffix(p agentsv1.AgentPhase) string {
	switch p {
	case agentsv1.AgentRunning:
		return "Running"
	case agentsv1.AgentStarting:
		return "Starting"
	case agentsv1.AgentSuspended:
		return "Suspended"
	default:
		return "NotRunning"
	}
}
