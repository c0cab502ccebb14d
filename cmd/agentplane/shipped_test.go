//go:build !nodevtools

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedClientsOfferNoDevState: the shipped build (-tags nodevtools, the image's) has no
// `agentplane dev`, so its client commands neither offer --state-dir nor point at dev's env
// file, and a missing URL is refused without the dev hint; this build (with the development
// tooling) offers both.
func TestShippedClientsOfferNoDevState(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "agentplane")
	build := exec.Command("go", "build", "-tags", "nodevtools", "-o", bin, ".")
	// Static, as the image's build and the tests' other builds (the compiled packages are shared).
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nodevtools: %v\n%s", err, out)
	}
	run := func(args ...string) (stdout, stderr string, code int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = withoutPlatformEnv(os.Environ())
		cmd.Dir = t.TempDir() // no .agentplane here either way
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatalf("agentplane %s: %v", strings.Join(args, " "), err)
		}
		return o.String(), e.String(), code
	}

	help, _, _ := run("agents", "list", "--help")
	if !strings.Contains(help, "--url") {
		t.Fatalf("the shipped agents list's help has no --url:\n%s", help)
	}
	for _, dev := range []string{"--state-dir", "dev.env"} {
		if strings.Contains(help, dev) {
			t.Errorf("the shipped agents list's help names %s:\n%s", dev, help)
		}
	}
	if _, stderr, code := run("agents", "list", "--state-dir", "x"); code == 0 || !strings.Contains(stderr, "unknown flag: --state-dir") {
		t.Errorf("the shipped build took --state-dir: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code := run("agents", "list")
	if want := "agentplane: no API URL: pass --url or set AGENTPLANE_URL"; code != 2 || strings.TrimSpace(stderr) != want {
		t.Errorf("the shipped build without a URL: exit %d, stderr %q; want exit 2, %q", code, stderr, want)
	}

	// This build, with `agentplane dev`, offers the state dir and says where dev writes.
	dev := runCLI(t, "agents", "list", "--help")
	if !strings.Contains(dev.stdout, "--state-dir") || !strings.Contains(dev.stdout, "AGENTPLANE_URL of <state-dir>/dev.env") {
		t.Errorf("the dev build's agents list's help lacks --state-dir:\n%s", dev.stdout)
	}
}

// withoutPlatformEnv is env without the variables that name a platform to the client commands.
func withoutPlatformEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AGENTPLANE_URL=") && !strings.HasPrefix(kv, "AGENTPLANE_TOKEN=") {
			out = append(out, kv)
		}
	}
	return out
}
