package stress

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/rules/auth"
)

// TestTokensEqual checks internal/rules/auth.TokensEqual's answers: string equality, for tokens of
// any lengths, prefixes of each other and trailing NULs included. Whether its time depends on
// where tokens differ is a timing property; tests assert no timings, so
// BenchmarkTokensEqual shows it as ratios against a baseline taken in the same run.
func TestTokensEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"gw_abc", "gw_abc", true},
		{"gw_abc", "gw_abd", false},
		{"gw_abc", "gw_ab", false},
		{"gw_ab", "gw_abc", false},
		{"", "gw_abc", false},
		{"gw_abc\x00", "gw_abc", false},
	} {
		if got := auth.TokensEqual(c.a, c.b); got != c.want {
			t.Errorf("TokensEqual(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// BenchmarkTokensEqual times TokensEqual on 256 KiB tokens where only the last byte differs
// (the baseline), where the first byte differs and where the guess is one byte shorter, in
// interleaved runs, and reports each case's median as a ratio of the baseline's: about 1 for
// a comparison over hashes, far below 1 for `==` or a byte-wise constant-time compare that
// returns early on a length mismatch. go test -run '^$' -bench TokensEqual ./test/stress/
func BenchmarkTokensEqual(b *testing.B) {
	const size = 256 << 10
	stored := strings.Repeat("s", size)
	cases := []struct{ name, guess string }{
		{"last-byte", stored[:size-1] + "x"},
		{"first-byte", "x" + stored[1:]},
		{"shorter", stored[:size-1]},
	}
	times := make([][]time.Duration, len(cases))
	for b.Loop() {
		for i, c := range cases {
			start := time.Now()
			if auth.TokensEqual(stored, c.guess) {
				b.Fatalf("%s: equal", c.name)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	ref := median(times[0])
	b.ReportMetric(float64(ref.Nanoseconds()), "baseline-ns")
	for i, c := range cases[1:] {
		b.ReportMetric(float64(median(times[i+1]))/float64(ref), c.name+"/last-byte")
	}
}
