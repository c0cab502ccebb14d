// Package skips plants violations of the skip rule (TestSkipRuleFiresOnPlantedViolations):
// the lines marked want skip directly, which CI=true would not fail.
package skips

import (
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

func TestDirect(t *testing.T) {
	t.Skip("no engine here") // want: t.Skip
}

func BenchmarkDirect(b *testing.B) {
	b.Skipf("needs %s", "root") // want: b.Skipf
}

func helper(tb testing.TB) {
	tb.SkipNow() // want: tb.SkipNow
}

func TestThroughTestenv(t *testing.T) {
	testenv.Skip(t, "no engine here")
	helper(t)
}
