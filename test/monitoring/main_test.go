package monitoring_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

var (
	envOnce sync.Once
	env     *kubeenv.Env
	envErr  error
)

// sharedEnv is the package's control plane (envtest with agentplane's CRDs), started by the
// first test that needs it and stopped by TestMain.
func sharedEnv(t *testing.T) *kubeenv.Env {
	t.Helper()
	envOnce.Do(func() { env, envErr = kubeenv.Start() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the control plane:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}
