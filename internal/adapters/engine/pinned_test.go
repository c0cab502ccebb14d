package engine_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// The engine version the code offers by default is the one the install script installs (and
// the tests run): one version, said twice only because a shell script cannot import Go.
func TestPinnedVersionIsTheInstalledOne(t *testing.T) {
	b, err := os.ReadFile("../../../hack/install-engine.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PINNED_VERSION=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("hack/install-engine.sh sets no PINNED_VERSION")
	}
	if got := string(m[1]); got != engine.PinnedVersion {
		t.Fatalf("hack/install-engine.sh installs openclaw %s, engine.PinnedVersion is %s", got, engine.PinnedVersion)
	}
}
