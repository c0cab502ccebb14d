package v1alpha1

// AgentSecret condition types (and ConditionReady).
const (
	// SecretDuplicate is True when another AgentSecret of the workspace has the same name.
	SecretDuplicate = "DuplicateName"
)

// Reasons of an AgentSecret's conditions.
const (
	ReasonValueAvailable   = "ValueAvailable"
	ReasonValueUnavailable = "ValueUnavailable"
	// ReasonReservedEnvName: the secret's environment name is reserved (it changes how
	// processes load code or find files, or the platform sets it); no agent is given it.
	// Only a secret created before the name was reserved can hold one.
	ReasonReservedEnvName = "ReservedEnvName"
	ReasonUnique          = "Unique"
	ReasonNameTaken       = "NameTaken"
)

// AnnotationSecretAttachedAt is set by an attach through the REST facade, after it wrote the
// agent's spec.secrets, to the time of the attach. Nothing reads the value: the write moves
// the secret's resourceVersion, so a delete conditional on the version it checked against the
// agents' specs fails (and checks again) rather than orphan the agent, and an attach of a
// secret deleted meanwhile finds it gone and is undone.
const AnnotationSecretAttachedAt = "agentplane.io/attached-at"
