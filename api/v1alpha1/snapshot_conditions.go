package v1alpha1

// SnapshotFinalizer lets the Snapshot controller remove the archive from storage before the
// Snapshot goes away.
const SnapshotFinalizer = "agentplane.io/snapshot"

// Reasons of a Snapshot's Ready condition (and ReasonAgentNotFound).
const (
	// ReasonArchived: the Snapshot is stored (Ready=True).
	ReasonArchived = "Archived"
	// ReasonArchiveFailed: archiving or storing failed for good (phase failed).
	ReasonArchiveFailed = "ArchiveFailed"
	// ReasonQuotaExceeded: the archive does not fit in the workspace's snapshot quota
	// (spec.quotas.snapshots); nothing of it is kept (phase failed).
	ReasonQuotaExceeded = "QuotaExceeded"
)

// AnnotationSnapshotRequestedAt is when a Snapshot was asked for, RFC 3339 with nanoseconds
// (the facade sets it; the controller stamps Snapshots created without it). It orders
// snapshots created within the same second (creationTimestamp keeps seconds only).
const AnnotationSnapshotRequestedAt = "agentplane.io/requested-at"
