package v1alpha1

// AgentFinalizer lets the Agent controller stop the runtime and release the agent's slot
// before the Agent goes away.
const AgentFinalizer = "agentplane.io/agent"

// Agent condition types.
const (
	// AgentProvisioned is True once the runtime holds everything the agent needs
	// (workspace, config, token, process or StatefulSet).
	AgentProvisioned = "Provisioned"
	// AgentGatewayReady is True while the gateway answers its health check.
	AgentGatewayReady = "GatewayReady"
	// AgentSnapshotRestored reports the last restore of the workspace from
	// spec.desiredSnapshot.
	AgentSnapshotRestored = "SnapshotRestored"
	// AgentConfigApplied is True when the engine config file holds the render of the user's
	// config (spec.configRef) and the agent's Channels.
	AgentConfigApplied = "ConfigApplied"
	// ConditionSuspended is True while the agent sleeps (no gateway runs; a request or a due
	// task wakes it), False while it is awake.
	ConditionSuspended = "Suspended"
)

// Reasons of the Suspended condition (and of GatewayReady and Ready while it sleeps).
const (
	// ReasonSuspendedBySpec: spec.suspended asks the agent to sleep.
	ReasonSuspendedBySpec = "Suspended"
	// ReasonIdle: the idle policy put the agent to sleep (no request for spec.idleAfter).
	ReasonIdle = "Idle"
	// ReasonAwake: the agent runs (no suspension asked, or not idle yet).
	ReasonAwake = "Awake"
	// ReasonWokenForTask: woken ahead of a scheduled task.
	ReasonWokenForTask = "WokenForTask"
	// ReasonWokenByRequest: woken by a request that needs the gateway.
	ReasonWokenByRequest = "WokenByRequest"
	// ReasonWokenByMessage: woken by the channel relay for a message to one of its channels
	// (spec.wakeRequestedAt with AnnotationMessageWake).
	ReasonWokenByMessage = "WokenByMessage"
	// ReasonSuspendPending: the controller could not list the agent's scheduled tasks and keeps it
	// awake rather than miss one (retried).
	ReasonSuspendPending = "SuspendPending"
)

// Wake reasons recorded in status.sleep.wakeReason (Task) and counted by the wakes metric.
const (
	WakeForTask    = "Task"
	WakeForRequest = "Request"
	WakeForMessage = "Message"
)

// AnnotationMessageWake is the spec.wakeRequestedAt (RFC 3339) the channel relay set to wake
// the agent for a message to one of its channels. A wake whose stamp it names was asked for
// by a message (ReasonWokenByMessage); any later stamp by a request. The facade's own wake
// requests and a suspend remove it: the API keeps seconds, and after a suspend (which clears
// the stamp) a request may get the very stamp of a message's wake before it.
const AnnotationMessageWake = "agentplane.io/message-wake"

// AnnotationLastActive is the last time the REST facade served a request for the agent
// (RFC 3339, written at most once a minute per agent): the idle policy counts from it.
const AnnotationLastActive = "agentplane.io/last-active"

// Reasons of the ConfigApplied condition (and ReasonWaitingForAgent).
const (
	// ReasonConfigRendered: the file holds the render of the current inputs.
	ReasonConfigRendered = "Rendered"
	// ReasonConfigSourceNotFound: spec.configRef names a Secret or key that does not exist.
	ReasonConfigSourceNotFound = "ConfigSourceNotFound"
	// ReasonConfigInvalid: the user's config is not a JSON or JSON5 object.
	ReasonConfigInvalid = "ConfigInvalid"
	// ReasonConfigWriteFailed: the file could not be read or written in the agent's home.
	ReasonConfigWriteFailed = "ConfigWriteFailed"
)

// Reasons of the Provisioned and GatewayReady conditions.
const (
	ReasonProvisioning      = "Provisioning"
	ReasonProvisioned       = "Provisioned"
	ReasonProvisionFailed   = "ProvisionFailed"
	ReasonAgentLimitReached = "AgentLimitReached"
	// ReasonInvalidVersion: spec.engine.version is not one the platform offers.
	ReasonInvalidVersion = "InvalidVersion"
	ReasonStarting       = "Starting"
	ReasonHealthy        = "Healthy"
	ReasonStopped        = "Stopped"
	// ReasonCrashed: the gateway exited on its own.
	ReasonCrashed = "GatewayCrashed"
	// ReasonGatewayStartFailed: the gateway process could not be started (local runtime).
	ReasonGatewayStartFailed = "GatewayStartFailed"
	// ReasonGatewayStartTimeout: the gateway did not become healthy in time (local runtime).
	ReasonGatewayStartTimeout = "GatewayStartTimeout"
	// ReasonGatewayUnhealthy: a running gateway stopped answering its health check.
	ReasonGatewayUnhealthy = "GatewayUnhealthy"
	// ReasonRestoredFromCheckpoint: a waking agent's gateway was restored from the
	// checkpoint taken when it was suspended (local runtime with CRIU).
	ReasonRestoredFromCheckpoint = "RestoredFromCheckpoint"
	// ReasonCheckpointRestoreFailed: that checkpoint could not be restored, so the gateway
	// starts anew (a cold resume; the home is kept). The message says why.
	ReasonCheckpointRestoreFailed = "CheckpointRestoreFailed"
	// ReasonBornFromGatewayTemplate: a new agent's gateway was restored from its engine's
	// template (local runtime with CRIU) instead of booting.
	ReasonBornFromGatewayTemplate = "BornFromGatewayTemplate"
	// ReasonGatewayTemplateUnavailable: a new agent's gateway boots cold because its engine's
	// template is missing, being made, stale, off, or could not be restored; the message
	// says which.
	ReasonGatewayTemplateUnavailable = "GatewayTemplateUnavailable"
	// Reasons the kube runtime reports besides the kubelet's own container reasons.
	ReasonPodNotCreated  = "PodNotCreated"
	ReasonPodTerminating = "PodTerminating"
	ReasonUpdating       = "Updating"
	ReasonUnschedulable  = "Unschedulable"
	// ReasonNodeNotReady: the gateway's node stopped reporting (its kubelet is down or
	// unreachable); the gateway's state is unknown until it reports again.
	ReasonNodeNotReady = "NodeNotReady"
	ReasonPodExited    = "Error"
	ReasonPodFailed    = "PodFailed"

	// ReasonTemplateNotFound: spec.template names no published AgentTemplate (the agent is
	// not started until it does).
	ReasonTemplateNotFound = "TemplateNotFound"
)

// Reasons of the SnapshotRestored condition (and ReasonStorageUnavailable,
// ReasonStorageNotConfigured).
const (
	// ReasonRestored: the workspace holds the snapshot's files.
	ReasonRestored = "Restored"
	// ReasonRestoreFailed: the runtime could not restore the archive.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonSnapshotNotFound: the CID is not a snapshot of the agent (or its template), or
	// storage does not hold it.
	ReasonSnapshotNotFound = "SnapshotNotFound"
	// ReasonRestoring: a restore the spec asks for has not happened yet (Ready).
	ReasonRestoring = "Restoring"
	// ReasonWaitingForAgent: the agent's home cannot be reached yet (no home, no pod).
	ReasonWaitingForAgent = "WaitingForAgent"
)

// EventGatewayCrashed is the reason of the Warning event an agent gets when the runtime saw
// its gateway exit and restarted it (status.restarts grew).
const EventGatewayCrashed = "GatewayCrashed"

// Labels, annotations and keys of an agent's objects.
const (
	// LabelGatewayTokenOf marks the core Secret holding an agent's gateway token (value: the
	// agent's name).
	LabelGatewayTokenOf = "agentplane.io/gateway-token-of"
	// GatewayTokenDataKey is the data key of the gateway token in that Secret.
	GatewayTokenDataKey = "token"
	// ConfigDataKey is the data key of the user's engine config in the Secret `PUT /config`
	// writes (`<agent>-config`).
	ConfigDataKey = "config"
	// LabelConfigOf marks that Secret (value: the agent's name).
	LabelConfigOf = "agentplane.io/config-of"
	// AnnotationTemplateApplied records that spec.template was expanded into the agent's
	// spec (value: `<template>@<generation>`), so that it is expanded once.
	AnnotationTemplateApplied = "agentplane.io/template-applied"
	// AnnotationApplied (on the kube runtime's StatefulSet) fingerprints what the runtime last
	// applied; an Ensure that would apply the same skips the applies.
	AnnotationApplied = "agentplane.io/applied"
	// AnnotationCreated (on the kube runtime's StatefulSet) marks one made by a plain create:
	// its first apply adopts the fields the create set, and drops the mark.
	AnnotationCreated = "agentplane.io/created"
	// AnnotationConfigHash on the pod template rolls the pod when it changes.
	AnnotationConfigHash = "agentplane.io/config-hash"
)
