package browser

import (
	"context"
	"fmt"
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

// suite is one browser test program's run: the npm packages installed (playwright-core,
// axe-core), a control plane and a platform of its own with the engine double, chromium, and
// the dir its screenshots go to ($AGENTPLANE_SCREENSHOT_DIR, default the test's temporary dir).
type suite struct {
	ctx      context.Context
	dir      string // the installed packages and the test programs
	chromium string
	p        *agentplanetest.Platform
	shots    string
}

// startSuite installs the packages and starts the platform with opts; everything it starts
// is stopped when the test ends.
func startSuite(t *testing.T, opts ...agentplanetest.Option) *suite {
	t.Helper()
	s := &suite{chromium: requireTools(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	s.ctx = ctx
	root := testenv.RepoRoot()
	install := exec.CommandContext(ctx, filepath.Join(root, "hack", "npm-cache.sh"), "console-browser", filepath.Join(root, "test", "browser"))
	install.Stderr = os.Stderr
	out, err := install.Output()
	if err != nil {
		t.Fatalf("installing playwright-core and axe-core from npm: %v", err)
	}
	s.dir = strings.TrimSpace(string(out))
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
	ctrllog.SetLogger(logr.Discard()) // the platform's logs are not this test's output
	s.p, err = agentplanetest.Start(ctx, cfg, append([]agentplanetest.Option{agentplanetest.WithLogger(logr.Discard())}, opts...)...)
	if err != nil {
		t.Fatalf("start agentplane: %v", err)
	}
	t.Cleanup(func() {
		if err := s.p.Stop(); err != nil {
			t.Errorf("stop agentplane: %v", err)
		}
	})
	if s.shots = os.Getenv("AGENTPLANE_SCREENSHOT_DIR"); s.shots == "" {
		s.shots = t.TempDir()
	} else if err := os.MkdirAll(s.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

// token is a token of the workspace's owner with every scope.
func (s *suite) token(t *testing.T, workspace string) string {
	t.Helper()
	tok, err := s.p.Token(workspace)
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	return tok
}

// run runs the test program script (node's test runner) with env beside the platform's URL,
// chromium and the screenshots' dir, and fails unless exactly pass tests ran and none failed.
func (s *suite) run(t *testing.T, script string, pass int, env ...string) {
	t.Helper()
	node := exec.CommandContext(s.ctx, "node", "--test", "--test-reporter=spec", "--test-concurrency=1", filepath.Join(s.dir, script))
	node.Dir = s.dir
	node.Env = append(append(os.Environ(), "AGENTPLANE_URL="+s.p.URL(), "CHROMIUM="+s.chromium, "SCREENSHOT_DIR="+s.shots), env...)
	// Node and the chromium it starts share a process group, which is ended whatever happens.
	node.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	node.Cancel = func() error { return syscall.Kill(-node.Process.Pid, syscall.SIGKILL) }
	node.WaitDelay = 5 * time.Second
	var stdout strings.Builder
	node.Stdout, node.Stderr = io.MultiWriter(&stdout, os.Stdout), os.Stderr
	runErr := node.Run()
	if node.Process != nil {
		_ = syscall.Kill(-node.Process.Pid, syscall.SIGKILL) // chromium, should node have left it
	}
	if runErr != nil {
		t.Fatalf("%s failed (%v); see its output above", script, runErr)
	}
	if !regexp.MustCompile(`(?m)^ℹ fail 0$`).MatchString(stdout.String()) ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^ℹ pass %d$`, pass)).MatchString(stdout.String()) {
		t.Fatalf("not every test of %s ran and passed:\n%s", script, stdout.String())
	}
}

// screenshot fails unless the program saved name; with AGENTPLANE_UPDATE_SCREENSHOTS=1 it is
// copied to docs/images/doc (docs that show it), when doc is not "".
func (s *suite) screenshot(t *testing.T, name, doc string) {
	t.Helper()
	shot := filepath.Join(s.shots, name)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("screenshot %s missing: %v", name, err)
	}
	if doc == "" || os.Getenv("AGENTPLANE_UPDATE_SCREENSHOTS") != "1" {
		return
	}
	b, err := os.ReadFile(shot)
	dir := filepath.Join(testenv.RepoRoot(), "docs", "images")
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, doc), b, 0o644)
	}
	if err != nil {
		t.Fatalf("update docs/images/%s: %v", doc, err)
	}
}

// requireTools fails (not skips) without node, npm or chromium, and returns chromium's path.
func requireTools(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required for the console's browser test", tool)
		}
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is required for the console's browser test: run hack/install-chromium.sh (make test does)")
	}
	return chromium
}
