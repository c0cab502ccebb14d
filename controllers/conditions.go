package controllers

import (
	"strings"
	"time"
)

// What reconcilers copy into conditions and events is bounded: an error or a command's output
// can be long.
const (
	// maxShortMessage bounds what a condition repeats of a command's output or an error
	// (Truncate).
	maxShortMessage = 400
	// maxConditionMessage bounds error text copied into conditions and events
	// (TruncateMessage).
	maxConditionMessage = 1024
)

// Truncate bounds a condition message to maxShortMessage bytes of valid UTF-8, marking a cut
// with an ellipsis.
func Truncate(s string) string {
	if len(s) <= maxShortMessage {
		return s
	}
	return strings.ToValidUTF8(s[:maxShortMessage], "") + "…"
}

// TruncateMessage bounds text copied into conditions and events to maxConditionMessage bytes.
func TruncateMessage(s string) string {
	if len(s) > maxConditionMessage {
		return s[:maxConditionMessage]
	}
	return s
}

// Waits of the controllers that read storage or an agent's home (the Agent controller's
// restores, the Snapshot controller's archives).
const (
	// DefaultStorageRetryMin and DefaultStorageRetryMax bound the wait between attempts while
	// storage cannot be reached: the wait is as long as the outage has lasted, within bounds.
	DefaultStorageRetryMin = time.Second
	DefaultStorageRetryMax = time.Minute
	// AgentWaitPoll re-checks an agent whose workspace cannot be reached yet.
	AgentWaitPoll = 5 * time.Second
)

// StaleCacheRetry is how soon a pass whose write conflicted (it read a cache older than the
// stored object) runs again, on fresh data; the watch event of the write it lost to usually
// comes first.
const StaleCacheRetry = 100 * time.Millisecond

// RetryWait clamps elapsed into [lo, hi] (DefaultStorageRetryMin and DefaultStorageRetryMax
// when zero).
func RetryWait(elapsed, lo, hi time.Duration) time.Duration {
	if lo <= 0 {
		lo = DefaultStorageRetryMin
	}
	if hi <= 0 {
		hi = DefaultStorageRetryMax
	}
	return min(max(elapsed, lo), max(hi, lo))
}
