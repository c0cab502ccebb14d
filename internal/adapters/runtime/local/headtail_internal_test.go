package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHeadTailLog: a failed copy's status quotes its log's first and last lines, the whole
// log when it is short: what it said after its thaw is not pushed out by minutes of a poll.
func TestHeadTailLog(t *testing.T) {
	numbered := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "line %d of the copy's log\n", i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, log, want string
	}{
		{"empty", "", ""},
		{"short", numbered(1, 3), strings.TrimSpace(numbered(1, 3))},
		{"head and tail meet", numbered(1, headLines+tailLines), strings.TrimSpace(numbered(1, headLines+tailLines))},
		{"longer", numbered(1, 40), numbered(1, headLines) + "...\n" + strings.TrimSpace(numbered(31, 40))},
		{"longer than its buffer", numbered(1, 2000), numbered(1, headLines) + "...\n" + strings.TrimSpace(numbered(1991, 2000))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "gateway.log")
			if err := os.WriteFile(p, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := headTailLog(p); got != tc.want {
				t.Fatalf("headTailLog =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	if got := headTailLog(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Fatalf("no log: %q", got)
	}
}
