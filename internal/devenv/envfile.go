package devenv

import (
	"fmt"
	"os"
	"strings"
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
