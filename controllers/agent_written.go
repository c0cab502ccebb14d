package controllers

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// writtenWindow is how long a status this controller wrote stands in for a cache that has not
// seen it yet (cache lag is usually milliseconds).
const writtenWindow = 5 * time.Second

// writtenStatus remembers, per agent, a digest of the status the Agent controller last wrote.
// The pass that follows a write (triggered by the objects the first one created) often reads
// a cache without that write: it computes the same status again, finds it differs from the
// stale copy and would patch it, conflict (optimistic lock) and run once more. With the digest
// it sees the status is already written and skips the patch: one status write per change.
type writtenStatus struct {
	m sync.Map // types.UID -> writtenEntry
}

type writtenEntry struct {
	sum [sha256.Size]byte
	at  time.Time
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

// fresh reports whether sum is what was written for uid within the window.
func (w *writtenStatus) fresh(uid types.UID, sum [sha256.Size]byte, now time.Time) bool {
	v, ok := w.m.Load(uid)
	if !ok {
		return false
	}
	e := v.(writtenEntry)
	return e.sum == sum && now.Sub(e.at) < writtenWindow
}

func (w *writtenStatus) store(uid types.UID, sum [sha256.Size]byte, now time.Time) {
	w.m.Store(uid, writtenEntry{sum: sum, at: now})
}

func (w *writtenStatus) forget(uid types.UID) { w.m.Delete(uid) }

// homeRecord remembers, per agent, what a pass of this process last did to the agent's home
// (the engine config it rendered, the skills it unpacked). The status records the same once
// its write lands. A lost write (a conflict with another writer of the status, which then
// runs the pass again on the cached object) leaves the status naming an older state of the
// home; a pass that trusted it could skip work the home needs, for example when a secret is
// detached and attached again before the status caught up. Where a record and the status
// disagree, the record is the newer: only this process's passes change the home (after a
// restart there is no record and the status is all there is).
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
