// Package snapshots orders an agent's Snapshots: the history both the REST facade and the
// controllers read.
package snapshots

import (
	"sort"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// RequestedAt is when s was asked for: the annotation, else its creation time.
func RequestedAt(s *agentsv1.Snapshot) time.Time {
	if v := s.Annotations[agentsv1.AnnotationSnapshotRequestedAt]; v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return s.CreationTimestamp.Time
}

// Newer orders snapshots newest first: by creation second (the API server's clock), then by
// the requested-at annotation, then by name.
func Newer(a, b *agentsv1.Snapshot) bool {
	if sa, sb := a.CreationTimestamp.Unix(), b.CreationTimestamp.Unix(); sa != sb {
		return sa > sb
	}
	if ta, tb := RequestedAt(a), RequestedAt(b); !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.Name > b.Name
}

// Completed returns the completed Snapshots of agent that are not being deleted, newest
// first: the agent's snapshot history.
func Completed(items []agentsv1.Snapshot, agent string) []agentsv1.Snapshot {
	out := []agentsv1.Snapshot{}
	for i := range items {
		s := &items[i]
		if s.Spec.AgentRef.Name == agent && s.Status.Phase == agentsv1.SnapshotCompleted && s.Status.CID != "" && s.DeletionTimestamp == nil {
			out = append(out, *s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return Newer(&out[i], &out[j]) })
	return out
}
