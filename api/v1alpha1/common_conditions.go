package v1alpha1

// The vocabulary of agentplane's objects: condition types, reasons, labels, annotations and
// finalizers live in this package (one <kind>_conditions.go per kind), so the controllers,
// the REST facade and the runtimes speak the same words without importing each other.

// Condition types shared by several kinds.
const (
	// ConditionReady is True when the object is fully reconciled and usable.
	ConditionReady = "Ready"
)

// Reasons shared by several kinds.
const (
	// ReasonAgentNotFound: the object's agent does not exist.
	ReasonAgentNotFound = "AgentNotFound"
	// ReasonStorageUnavailable: the storage backend cannot be reached; the controller retries.
	ReasonStorageUnavailable = "StorageUnavailable"
	// ReasonStorageNotConfigured: the platform runs without storage.
	ReasonStorageNotConfigured = "StorageNotConfigured"
)

// Labels shared by several kinds.
const (
	// LabelAgent is the agent an object belongs to (Snapshots, Channels, Domains, the
	// runtime's StatefulSets, Services and Secrets), when the name fits a label value.
	LabelAgent = "agentplane.io/agent"
	// LabelWorkspace marks a namespace as a workspace's (value: the workspace name).
	LabelWorkspace = "agentplane.io/workspace"
	// LabelCreatedBy is the user who created an object through the REST API.
	LabelCreatedBy = "agentplane.io/created-by"
	// LabelUser is the user an ApiKey authenticates.
	LabelUser = "agentplane.io/user"
	// LabelIssue marks an Issue (a ConfigMap of the closed-beta Issues routes).
	LabelIssue = "agentplane.io/issue"

	// The Kubernetes recommended labels on the objects agentplane makes.
	LabelAppName      = "app.kubernetes.io/name"
	LabelAppInstance  = "app.kubernetes.io/instance"
	LabelAppManagedBy = "app.kubernetes.io/managed-by"
	LabelAppPartOf    = "app.kubernetes.io/part-of"
	// ManagedBy is the value of LabelAppManagedBy and LabelAppPartOf.
	ManagedBy = "agentplane"
)
