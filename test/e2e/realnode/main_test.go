package realnode

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/test/e2e"
)

// The package's tests share one build of agentplane (e2e.BuildAgentplane); Main removes it.
func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }
