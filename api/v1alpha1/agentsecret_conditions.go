package v1alpha1

// AgentSecret condition types (and ConditionReady).
const (
	// SecretDuplicate is True when another AgentSecret of the workspace has the same name.
	SecretDuplicate = "DuplicateName"
)

// Reasons of an AgentSecret's conditions.
const (
	ReasonValueAvailable = "ValueAvailable"
	ReasonUnique         = "Unique"
)
