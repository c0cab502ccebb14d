package gen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Helm is the helm binary of the chart tests: $HELM, else bin/helm of the checkout (make helm).
// A missing helm is an error, never a reason to skip.
func Helm(repoRoot string) (string, error) {
	p := os.Getenv("HELM")
	if p == "" {
		p = filepath.Join(repoRoot, "bin", "helm")
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no helm at %s: run `make helm` (or set HELM): %w", p, err)
	}
	return p, nil
}

// Template renders a chart (helm template, release agentplane) in namespace with the values
// files and --set flags in args.
func Template(helm, chartDir, namespace string, args ...string) ([]byte, error) {
	cmd := exec.Command(helm, append([]string{"template", "agentplane", chartDir, "--namespace", namespace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s %v: %w: %s", chartDir, args, err, stderr.String())
	}
	return out, nil
}
