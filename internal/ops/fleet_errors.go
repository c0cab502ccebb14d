package ops

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// ErrorWindow is how far back a fleet row's errors count: the last hour (also the API
// server's default event TTL, so nothing older is kept anyway).
const ErrorWindow = time.Hour

// EventTypeField is the field selector of an event's type (Normal, Warning): the API server
// selects on it, and a test's fake client needs it indexed.
const EventTypeField = "type"

// warningsByAgent counts the Warning events about each agent of namespace ns whose last
// occurrence is within ErrorWindow of now: the gateway's crashes, a failed restore or skill,
// a halted rollout, the agent no longer running. A series counts each of its occurrences.
// One live list of the namespace's warnings (events are not in the manager's cache).
func warningsByAgent(ctx context.Context, r client.Reader, ns string, now time.Time) (map[string]int64, error) {
	var list eventsv1.EventList
	if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{EventTypeField: corev1.EventTypeWarning}); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for i := range list.Items {
		e := &list.Items[i]
		if e.Type != corev1.EventTypeWarning || e.Regarding.Kind != agentsv1.KindAgent || e.Regarding.Namespace != ns {
			continue
		}
		last, n := eventLast(e)
		if now.Sub(last) <= ErrorWindow {
			out[e.Regarding.Name] += n
		}
	}
	return out, nil
}

// eventLast is when an event last happened and how many times it did.
func eventLast(e *eventsv1.Event) (time.Time, int64) {
	if s := e.Series; s != nil {
		return s.LastObservedTime.Time, int64(max(s.Count, 1))
	}
	last := e.EventTime.Time
	if t := e.DeprecatedLastTimestamp.Time; t.After(last) {
		last = t
	}
	if last.IsZero() {
		last = e.CreationTimestamp.Time
	}
	return last, int64(max(e.DeprecatedCount, 1))
}
