package platform

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
)

type noteSink struct{ notes []string }

func (s *noteSink) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(note, args...))
}

func TestEventNotesFitTheAPIServersLimit(t *testing.T) {
	logTail := strings.Repeat("gateway log line é\n", 200) // a crashed gateway's message: ~4 KB
	for _, tc := range []struct {
		name, note string
		args       []any
		want       string // "" : cut
	}{
		{name: "short note kept as formatted", note: "agent is %s: %s", args: []any{"running", "ok"}, want: "agent is running: ok"},
		{name: "exactly the limit kept", note: "%s", args: []any{strings.Repeat("a", maxEventNote)}, want: strings.Repeat("a", maxEventNote)},
		{name: "a gateway's log tail cut", note: "agent is %s: %s", args: []any{"not_running", logTail}},
		{name: "a percent sign in the formatted text is not formatted again", note: "%s", args: []any{"100%s" + logTail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &noteSink{}
			boundedNotes{sink}.Eventf(nil, nil, "Warning", "R", "A", tc.note, tc.args...)
			got := sink.notes[0]
			if tc.want != "" {
				if got != tc.want {
					t.Fatalf("note = %q, want %q", got, tc.want)
				}
				return
			}
			full := fmt.Sprintf(tc.note, tc.args...)
			if len(got) > maxEventNote || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") ||
				!strings.HasPrefix(full, strings.TrimSuffix(got, "…")) {
				t.Fatalf("note of %d bytes (valid UTF-8: %v) is not a marked prefix of the %d-byte note", len(got), utf8.ValidString(got), len(full))
			}
		})
	}
}
