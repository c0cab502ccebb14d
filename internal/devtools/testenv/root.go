// Package testenv is what every test tier shares and none starts: the checkout's root, the
// rule that CI runs every test (Skip), the real-node guard, a goroutine-safe buffer and the
// manifest decoder. The control plane (envtest) is internal/devtools/testenv/kubeenv's.
package testenv

import (
	"path/filepath"
	"runtime"
)

// RepoRoot is the root of the agentplane checkout.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}
