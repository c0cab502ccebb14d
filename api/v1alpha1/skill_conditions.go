package v1alpha1

// Reasons of a Skill's Ready condition (and ReasonStorageUnavailable,
// ReasonStorageNotConfigured).
const (
	ReasonSkillStored        = "Stored"
	ReasonSkillBundleMissing = "BundleMissing"
)

// Annotations of Skill objects.
const (
	// AnnotationSkillInstalledAt is when the current version was installed (RFC 3339).
	AnnotationSkillInstalledAt = "agentplane.io/installed-at"
	// AnnotationSkillPreviousCIDs lists, comma-separated and newest first, the bundles of
	// earlier versions, so agents still attaching them can be updated and detached.
	AnnotationSkillPreviousCIDs = "agentplane.io/previous-cids"
)
