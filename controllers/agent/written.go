package agent

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// writtenStatus remembers, per agent, a digest of the status the Agent controller last wrote
// and the resourceVersions its pass saw before that write. The pass that follows a write
// (triggered by the objects the first one created) often reads a cache without that write: it
// computes the same status again, finds it differs from the stale copy and would patch it,
// conflict (optimistic lock) and run once more. A pass that reads the agent at one of those
// resourceVersions reads an object older than the write, whose status is already stored: when
// it computes the same status it skips the patch, so there is one status write per change.
// Keyed on the resourceVersion, the record is exact: any other read (a newer object, or one
// written by anyone since) does not match it, however long the cache lags.
type writtenStatus struct {
	m sync.Map // types.UID -> writtenEntry
}

type writtenEntry struct {
	sum [sha256.Size]byte
	// before are the resourceVersions the writing pass read and wrote its status on (they
	// differ when the pass wrote the object's spec or metadata first).
	before [2]string
}

// statusSum digests s, leaving out the conditions' transition times (a pass on a stale cache
// sets them anew for the same conditions).
func statusSum(s *agentsv1.AgentStatus) [sha256.Size]byte {
	cp := s.DeepCopy()
	for i := range cp.Conditions {
		cp.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	raw, _ := json.Marshal(cp)
	return sha256.Sum256(raw)
}

// fresh reports whether sum is what was written for uid by a pass that saw resourceVersion rv
// before its write.
func (w *writtenStatus) fresh(uid types.UID, rv string, sum [sha256.Size]byte) bool {
	v, ok := w.m.Load(uid)
	if !ok {
		return false
	}
	e := v.(writtenEntry)
	return e.sum == sum && rv != "" && (rv == e.before[0] || rv == e.before[1])
}

// store records that sum was written for uid by a pass that read resourceVersion read and
// wrote the status on resourceVersion base.
func (w *writtenStatus) store(uid types.UID, sum [sha256.Size]byte, read, base string) {
	w.m.Store(uid, writtenEntry{sum: sum, before: [2]string{read, base}})
}

func (w *writtenStatus) forget(uid types.UID) { w.m.Delete(uid) }

// homeRecord remembers, per agent, what a pass of this process last did to the agent's home
// (the engine config it rendered, the skills it unpacked). The status records the same once
// its write lands. A lost write (its optimistic lock conflicts with any change of the agent
// since the pass read it: a spec change, a status field of another writer; the pass then runs
// again on the cached object) leaves the status naming an older state of the home; a pass
// that trusted it could skip work the home needs, for example when a secret is detached and
// attached again before the status caught up. Where a record and the status disagree, the
// record is the newer: only this process's passes change the home (after a restart there is
// no record and the status is all there is). It is a record of the home, not of a status
// write, so no resourceVersion keys it: whatever object a pass reads, the home is as the
// record says.
type homeRecord[T any] struct {
	m sync.Map // types.UID -> T
}

func (h *homeRecord[T]) load(uid types.UID) (T, bool) {
	v, ok := h.m.Load(uid)
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

func (h *homeRecord[T]) store(uid types.UID, v T) { h.m.Store(uid, v) }

func (h *homeRecord[T]) forget(uid types.UID) { h.m.Delete(uid) }
