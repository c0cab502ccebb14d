package images

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestCheckStatic: a CGO_ENABLED=0 build passes; a binary that needs the C library's loader
// (Debian's sh) is refused with the build setting that fixes it.
func TestCheckStatic(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "probe")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentplane-probe")
	build.Dir = testenv.RepoRoot()
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if err := CheckStatic(bin); err != nil {
		t.Errorf("static build refused: %v", err)
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStatic(sh); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("dynamic %s: %v", sh, err)
	}
}
