// Package testenv is what every test tier shares and none starts: the checkout's root, the
// rule that CI runs every test (Skip), the real-node guard, a goroutine-safe buffer and the
// manifest decoder. The control plane (envtest) is internal/devtools/testenv/kubeenv's.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/mod/modfile"
)

// modulePath is the module whose checkout RepoRoot finds.
const modulePath = "github.com/agentplane/agentplane"

// RepoRoot is the root of the agentplane checkout: the nearest directory at or above the
// working directory (a package's own under go test, the checkout's under make) whose go.mod
// declares the agentplane module. It does not read this file's path, which -trimpath builds
// (make test's, so that tests and binaries share their compiled packages) do not keep; only
// where no such directory is found does it fall back to that path.
func RepoRoot() string {
	if dir, err := os.Getwd(); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modfile.ModulePath(data) == modulePath {
				return d
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}
