package browser

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// TestFleetInChromium runs the fleet view's flows (fleet.test.mjs) against a platform of its
// own: filtering, sorting, a live phase change on the one stream, the charts, axe-core's
// accessibility check and the phone width. With AGENTPLANE_UPDATE_SCREENSHOTS=1 its
// screenshot is copied to docs/images/console-fleet.png (the README shows it).
func TestFleetInChromium(t *testing.T) {
	chromium := requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	install := exec.CommandContext(ctx, filepath.Join(root, "hack", "npm-cache.sh"), "console-browser", filepath.Join(root, "test", "browser"))
	install.Stderr = os.Stderr
	out, err := install.Output()
	if err != nil {
		t.Fatalf("installing playwright-core and axe-core from npm: %v", err)
	}
	dir := strings.TrimSpace(string(out))

	env := agentplanetest.NewEnvironment()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	ctrllog.SetLogger(logr.Discard())
	p, err := agentplanetest.Start(ctx, cfg, agentplanetest.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatalf("start agentplane: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop agentplane: %v", err)
		}
	})
	token, err := p.Token(workspace)
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	shots := os.Getenv("AGENTPLANE_SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	node := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "--test-concurrency=1", filepath.Join(dir, "fleet.test.mjs"))
	node.Dir = dir
	node.Env = append(os.Environ(), "AGENTPLANE_URL="+p.URL(), "AGENTPLANE_TOKEN="+token, "CHROMIUM="+chromium, "SCREENSHOT_DIR="+shots)
	node.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	node.Cancel = func() error { return syscall.Kill(-node.Process.Pid, syscall.SIGKILL) }
	node.WaitDelay = 5 * time.Second
	var stdout strings.Builder
	node.Stdout, node.Stderr = io.MultiWriter(&stdout, os.Stdout), os.Stderr
	runErr := node.Run()
	if node.Process != nil {
		_ = syscall.Kill(-node.Process.Pid, syscall.SIGKILL)
	}
	if runErr != nil {
		t.Fatalf("the fleet's browser test failed (%v); see its output above", runErr)
	}
	if !regexp.MustCompile(`(?m)^ℹ fail 0$`).MatchString(stdout.String()) ||
		!regexp.MustCompile(`(?m)^ℹ pass 8$`).MatchString(stdout.String()) {
		t.Fatalf("not every fleet browser test ran and passed:\n%s", stdout.String())
	}
	shot := filepath.Join(shots, "fleet.png")
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("screenshot fleet.png missing: %v", err)
	}
	if os.Getenv("AGENTPLANE_UPDATE_SCREENSHOTS") == "1" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "docs", "images", "console-fleet.png"), b, 0o644)
		}
		if err != nil {
			t.Fatalf("update docs/images/console-fleet.png: %v", err)
		}
	}
}
