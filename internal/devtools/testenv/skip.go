package testenv

import (
	"fmt"
	"os"
	"testing"
)

// underCI reports whether the tests run under CI (CI=true), where every test must run.
func underCI() bool { return os.Getenv("CI") == "true" }

// Skip skips t with the reason format (a missing tool, a host that cannot do what the test
// needs, a skip switch such as AGENTPLANE_SKIP_REAL_ENGINE or -short) on a developer's
// machine; under CI=true it fails t instead: CI honours no skip switch and provides what every
// test needs, so a skip there would hide a gap.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if underCI() {
		t.Fatalf("%s (under CI=true every test must run)", why)
	}
	t.Skip(why)
}
