package v1alpha1

// Every status field of every kind has exactly one writer, named by its field manager (the
// API server records it in metadata.managedFields). docs/ARCHITECTURE.md's "Status writers"
// table lists them; test/arch checks that every status write names one of these managers from
// the package the table assigns it, and an envtest spec (controllers/status_owners_test.go)
// that the API server's managedFields agree.
const (
	// ControllerFieldManager writes what a kind's reconciler (controllers/) computes from the
	// world each pass: every status field but those of StatusFieldManagers.
	ControllerFieldManager = "agentplane-controller"
	// QuotaFieldManager writes the slots and counts of limits that span objects
	// (internal/rules/quota's Limiter, whichever door or controller calls it).
	QuotaFieldManager = "agentplane-quota"
	// ModelProxyFieldManager writes status.usage (internal/adapters/modelproxy/kubeaccess's Recorder).
	ModelProxyFieldManager = "agentplane-model-proxy"
	// StorageMigrationFieldManager is the storage migration's (controllers/storageversion):
	// its no-op updates, which change no field of any kind but make the API server store
	// each object in StorageGroupVersion, and the CRDs' status.storedVersions after them.
	StorageMigrationFieldManager = "agentplane-storage-migration"
)

// StatusFieldManagers names, per kind, the top-level status fields that a manager other than
// ControllerFieldManager writes. A reconciler leaves them out of its status writes.
var StatusFieldManagers = map[string]map[string]string{
	"Agent": {
		"domainReservations": QuotaFieldManager,
		"usage":              ModelProxyFieldManager,
	},
	"Workspace": {
		"agentSlots": QuotaFieldManager,
		"storage":    QuotaFieldManager,
		"usage":      ModelProxyFieldManager,
	},
}

// StatusFieldManager is the manager that writes the top-level status field of kind.
func StatusFieldManager(kind, field string) string {
	if m, ok := StatusFieldManagers[kind][field]; ok {
		return m
	}
	return ControllerFieldManager
}
