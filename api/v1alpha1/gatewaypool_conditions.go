package v1alpha1

// Reasons of a GatewayPool's Ready condition (and ReasonInvalidVersion).
const (
	// ReasonPoolReady: every replica is booted and healthy (or none is asked for).
	ReasonPoolReady = "PoolReady"
	// ReasonPoolFilling: gateways are booting to reach spec.replicas.
	ReasonPoolFilling = "Filling"
	// ReasonPoolMembersFailing: gateways crash or never become healthy; new ones are started
	// after a backoff.
	ReasonPoolMembersFailing = "MembersFailing"
	// ReasonPoolFailed: the runtime refused the pool (an engine version this host lacks).
	ReasonPoolFailed = "PoolFailed"
	// ReasonPoolNoWorkspaces: the runtime keeps gateways in the agents' namespaces (kube) and
	// spec.workspaces names none, so the pool keeps no gateway.
	ReasonPoolNoWorkspaces = "NoWorkspaces"
	// ReasonRuntimeUnsupported: the runtime that runs agents here keeps no warm pools.
	ReasonRuntimeUnsupported = "RuntimeUnsupported"
)

// Events of a GatewayPool.
const (
	// EventPoolClaimed: a warm gateway was bound to a new agent.
	EventPoolClaimed = "Claimed"
)
