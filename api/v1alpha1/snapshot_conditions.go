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

// AnnotationSnapshotRelink, on a new Snapshot, names the CID of an archive its workspace's
// snapshot space already holds (`agentplane doctor --repair` sets it after a restore lost the
// Snapshot that recorded it): the Snapshot controller records that archive, within the
// snapshot quota, instead of archiving the agent's home again. It never deletes the archive:
// a relink that does not fit fails with QuotaExceeded and leaves it in storage.
const AnnotationSnapshotRelink = "agentplane.io/relink-archive"

// ReasonArchiveMissing: the archive a Snapshot was to relink (AnnotationSnapshotRelink) is not
// in storage (phase failed).
const ReasonArchiveMissing = "ArchiveMissing"
