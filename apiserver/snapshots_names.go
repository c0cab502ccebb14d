package apiserver

import (
	"sort"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/storage"
)

// Names shared by the snapshot routes and the Snapshot and Agent controllers (which import
// this package for them).
const (
	// LabelSnapshotAgent labels a Snapshot with its agent's name (when it fits a label value).
	LabelSnapshotAgent = "agentplane.io/agent"
	// AnnotationSnapshotRequestedAt is when a Snapshot was asked for, RFC 3339 with
	// nanoseconds (the facade sets it; the controller stamps Snapshots created without it). It
	// orders snapshots created within the same second (creationTimestamp keeps seconds only).
	AnnotationSnapshotRequestedAt = "agentplane.io/requested-at"

	// ConditionSnapshotRestored is the Agent condition that reports the last restore of the
	// workspace from spec.desiredSnapshot.
	ConditionSnapshotRestored = "SnapshotRestored"

	// ReasonRestoreRequested: the facade asked for a restore that has not happened yet.
	ReasonRestoreRequested = "RestoreRequested"
	// ReasonRestored: the workspace holds the snapshot's files.
	ReasonRestored = "Restored"
	// ReasonRestoreFailed: the runtime could not restore the archive.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonSnapshotNotFound: the CID is not a snapshot of the agent (or its template), or
	// storage does not hold it.
	ReasonSnapshotNotFound = "SnapshotNotFound"
	// ReasonStorageUnavailable: the storage backend cannot be reached; the controller retries.
	ReasonStorageUnavailable = "StorageUnavailable"
	// ReasonStorageNotConfigured: the platform runs without storage.
	ReasonStorageNotConfigured = "StorageNotConfigured"
	// ReasonWaitingForAgent: the agent's workspace cannot be reached yet (no home, no pod).
	ReasonWaitingForAgent = "WaitingForAgent"

	// ReasonArchived: the Snapshot is stored (Ready=True).
	ReasonArchived = "Archived"
	// ReasonArchiveFailed: archiving or storing failed for good (phase failed).
	ReasonArchiveFailed = "ArchiveFailed"
	// ReasonAgentNotFound: the Snapshot's agent does not exist (phase failed).
	ReasonAgentNotFound = "AgentNotFound"
)

// SnapshotSpace is the storage key space of a workspace's snapshots.
func SnapshotSpace(namespace string) string { return namespace + "/snapshots" }

// SnapshotRequestedAt is when s was asked for: the annotation, else its creation time.
func SnapshotRequestedAt(s *agentsv1.Snapshot) time.Time {
	if v := s.Annotations[AnnotationSnapshotRequestedAt]; v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return s.CreationTimestamp.Time
}

// NewerSnapshot orders snapshots newest first: by creation second (the API server's clock),
// then by the requested-at annotation, then by name.
func NewerSnapshot(a, b *agentsv1.Snapshot) bool {
	if sa, sb := a.CreationTimestamp.Unix(), b.CreationTimestamp.Unix(); sa != sb {
		return sa > sb
	}
	if ta, tb := SnapshotRequestedAt(a), SnapshotRequestedAt(b); !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.Name > b.Name
}

// CompletedSnapshots returns the completed Snapshots of agent that are not being deleted,
// newest first: the agent's snapshot history.
func CompletedSnapshots(items []agentsv1.Snapshot, agent string) []agentsv1.Snapshot {
	out := []agentsv1.Snapshot{}
	for i := range items {
		s := &items[i]
		if s.Spec.AgentRef.Name == agent && s.Status.Phase == agentsv1.SnapshotCompleted && s.Status.CID != "" && s.DeletionTimestamp == nil {
			out = append(out, *s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return NewerSnapshot(&out[i], &out[j]) })
	return out
}

// SameCID reports whether a and b name the same object once canonical (a CIDv1 in another
// multibase equals its base32 form); strings that do not parse are compared as they are.
func SameCID(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ca, errA := storage.CanonicalCID(a)
	cb, errB := storage.CanonicalCID(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return ca == cb
}
