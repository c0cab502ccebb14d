package devenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// EnvFileName is the file `agentplane dev` writes under its state directory for shells
// (`set -a; . dev.env`) and for tools that drive a dev platform (tests, benchmarks).
const EnvFileName = "dev.env"

// WriteEnvFile writes KUBECONFIG, AGENTPLANE_URL and AGENTPLANE_TOKEN to path (mode 0600: the
// token is a credential), atomically so a reader never sees half a file.
func WriteEnvFile(path, kubeconfig, url, token string) error {
	content := fmt.Sprintf("KUBECONFIG=%s\nAGENTPLANE_URL=%s\nAGENTPLANE_TOKEN=%s\n", kubeconfig, url, token)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadEnvFile reads the KEY=VALUE lines of path; a missing file reads as empty.
func ReadEnvFile(path string) map[string]string {
	out := map[string]string{}
	raw, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

// WaitEnvFile waits up to timeout for stateDir's env file to name the URL and token of a
// starting `agentplane dev`, and returns them. exited carries the process's exit (a channel
// with room for one value): if it exits first, its exit is put back on the channel for the
// caller and reported as the error.
func WaitEnvFile(stateDir string, timeout time.Duration, exited chan error) (url, token string, err error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		env := ReadEnvFile(filepath.Join(stateDir, EnvFileName))
		if env["AGENTPLANE_URL"] != "" && env["AGENTPLANE_TOKEN"] != "" {
			return env["AGENTPLANE_URL"], env["AGENTPLANE_TOKEN"], nil
		}
		select {
		case err := <-exited:
			exited <- err
			return "", "", fmt.Errorf("agentplane dev exited early: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", "", fmt.Errorf("agentplane dev did not write %s within %s", EnvFileName, timeout)
}
