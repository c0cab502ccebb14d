package platform

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
)

// maxEventNote is the longest note the API server takes in an events.k8s.io Event; it refuses
// a longer one whole ("can have at most 1024 characters") and the recorder does not retry.
const maxEventNote = 1024

// eventRecorder is the manager's recorder for the controller name, with every note cut to
// what the API server keeps. Notes carry what a gateway said (its last log lines, up to
// several KB), and an event refused for its length would be lost exactly when it matters.
func eventRecorder(mgr ctrl.Manager, name string) events.EventRecorder {
	return boundedNotes{mgr.GetEventRecorder(name)}
}

// boundedNotes formats a note and cuts it to maxEventNote bytes on a rune boundary, marking
// the cut with an ellipsis.
type boundedNotes struct{ events.EventRecorder }

func (b boundedNotes) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", cutNote(fmt.Sprintf(note, args...)))
}

func cutNote(s string) string {
	if len(s) <= maxEventNote {
		return s
	}
	const ellipsis = "…"
	s = s[:maxEventNote-len(ellipsis)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + ellipsis
}
