package v1alpha1

// Reasons of an EngineUpgrade's Ready condition (and ReasonInvalidVersion).
const (
	// ReasonUpgradeSucceeded: every selected agent runs the target version.
	ReasonUpgradeSucceeded = "Succeeded"
	// ReasonUpgradeProgressing: a wave is under way.
	ReasonUpgradeProgressing = "Progressing"
	// ReasonUpgradePaused: spec.paused holds the rollout between waves.
	ReasonUpgradePaused = "Paused"
	// ReasonUpgradeHalted: agents were rolled back; a spec change resumes the rollout.
	ReasonUpgradeHalted = "Halted"
	// ReasonInvalidSelector: spec.agentSelector is no valid label selector.
	ReasonInvalidSelector = "InvalidSelector"
)

// Events of an EngineUpgrade and of the Agents it upgrades.
const (
	EventWaveStarted   = "WaveStarted"
	EventSnapshotTaken = "SnapshotTaken"
	EventUpgraded      = "Upgraded"
	EventRolledBack    = "RolledBack"
	EventHalted        = "Halted"
	EventSucceeded     = "Succeeded"
)

// Per-agent upgrade states (AnnotationUpgradeState).
const (
	// AgentUpgradeSnapshotting: the Snapshot is being taken; the version is unchanged.
	AgentUpgradeSnapshotting = "Snapshotting"
	// AgentUpgradeUpgrading: spec.engine.version is the target; waiting for health.
	AgentUpgradeUpgrading = "Upgrading"
	// AgentUpgradeUpgraded: healthy on the target.
	AgentUpgradeUpgraded = "Upgraded"
	// AgentUpgradeRolledBack: put back on the previous version and snapshot.
	AgentUpgradeRolledBack = "RolledBack"
	// AgentUpgradeFailed: the snapshot failed; the version was never changed.
	AgentUpgradeFailed = "Failed"
)

// Annotations an EngineUpgrade keeps on each Agent of its current wave, so that a restarted
// manager resumes where it stopped.
const (
	// AnnotationUpgradePolicy names the EngineUpgrade and the wave (`<policy>/<wave>`).
	AnnotationUpgradePolicy = "agentplane.io/upgrade"
	// AnnotationUpgradeState is the agent's upgrade state (AgentUpgrade*).
	AnnotationUpgradeState = "agentplane.io/upgrade-state"
	// AnnotationUpgradePreviousVersion is spec.engine.version before the upgrade (empty: the
	// platform default).
	AnnotationUpgradePreviousVersion = "agentplane.io/upgrade-previous-version"
	// AnnotationUpgradeSnapshot is the CID of the snapshot taken before the upgrade.
	AnnotationUpgradeSnapshot = "agentplane.io/upgrade-snapshot"
	// AnnotationUpgradeStartedAt is when spec.engine.version was set to the target (RFC 3339);
	// the health timeout counts from it.
	AnnotationUpgradeStartedAt = "agentplane.io/upgrade-started-at"
	// LabelUpgrade marks the Snapshots an EngineUpgrade took (value: the policy's name).
	LabelUpgrade = "agentplane.io/engine-upgrade"
)
