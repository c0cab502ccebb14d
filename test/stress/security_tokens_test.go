package stress

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/auth"
)

// TestTokensEqualComparesHashesInConstantTime checks internal/auth.TokensEqual by its
// behaviour. Correctness: it is string equality, for tokens of any lengths, prefixes of each
// other included. Timing: it hashes both tokens and compares the fixed-size hashes, so its
// time depends on the lengths it hashes but not on where the tokens differ, nor on whether
// their lengths differ. Tokens of 256 KiB make the difference large: comparing the bytes
// themselves (subtle.ConstantTimeCompare on the raw tokens) would answer for tokens of
// different length in nanoseconds against ~100 µs for equal lengths, and `==` would answer
// for a first-byte mismatch in nanoseconds too; with the hashes every case costs about the
// same two SHA-256 passes. The check compares medians of interleaved runs with a factor of 2,
// far from both the expected 1 and the thousandfold gap of a leaking comparison.
func TestTokensEqualComparesHashesInConstantTime(t *testing.T) {
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

	const size = 256 << 10
	stored := strings.Repeat("s", size)
	cases := map[string]string{
		"same length, last byte differs":  stored[:size-1] + "x",
		"same length, first byte differs": "x" + stored[1:],
		"one byte shorter":                stored[:size-1],
	}
	times := map[string][]time.Duration{}
	for range 41 {
		for name, guess := range cases {
			start := time.Now()
			if auth.TokensEqual(stored, guess) {
				t.Fatalf("%s: equal", name)
			}
			times[name] = append(times[name], time.Since(start))
		}
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	ref := median(times["same length, last byte differs"])
	for name, d := range times {
		if m := median(d); m*2 < ref || m > 2*ref {
			t.Errorf("%s: median %s, against %s when only the last byte differs: the time depends on the tokens' content or lengths", name, m, ref)
		}
	}
}
