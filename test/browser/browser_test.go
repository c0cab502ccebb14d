// Package browser tests the web console (/console) in a real browser: Debian's chromium,
// driven by playwright-core from Node's test runner (console.test.mjs), against agentplane
// running in this process with the engine double (pkg/agentplanetest).
//
// Screenshots go to $AGENTPLANE_SCREENSHOT_DIR (default: the test's temporary directory);
// with AGENTPLANE_UPDATE_SCREENSHOTS=1 the agent page's is copied to
// docs/images/console-agent.png (the README shows it).
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

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

const workspace = "console"

func TestConsoleInChromium(t *testing.T) {
	chromium := requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	root := testenv.RepoRoot()
	install := exec.CommandContext(ctx, filepath.Join(root, "hack", "npm-cache.sh"), "console-browser", filepath.Join(root, "test", "browser"))
	install.Stderr = os.Stderr
	out, err := install.Output()
	if err != nil {
		t.Fatalf("installing playwright-core from npm: %v", err)
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
	ctrllog.SetLogger(logr.Discard()) // the platform's logs are not this test's output
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
	readToken := readOnlyToken(ctx, t, p)

	shots := os.Getenv("AGENTPLANE_SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	node := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "--test-concurrency=1", filepath.Join(dir, "console.test.mjs"))
	node.Dir = dir
	node.Env = append(os.Environ(),
		"AGENTPLANE_URL="+p.URL(),
		"AGENTPLANE_TOKEN="+token,
		"AGENTPLANE_READ_TOKEN="+readToken,
		"CHROMIUM="+chromium,
		"SCREENSHOT_DIR="+shots,
	)
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
		t.Fatalf("the console's browser test failed (%v); see its output above", runErr)
	}
	if !regexp.MustCompile(`(?m)^ℹ fail 0$`).MatchString(stdout.String()) ||
		!regexp.MustCompile(`(?m)^ℹ pass 12$`).MatchString(stdout.String()) {
		t.Fatalf("not every browser test ran and passed:\n%s", stdout.String())
	}
	for _, name := range []string{"overview.png", "agent.png", "config.png"} {
		if st, err := os.Stat(filepath.Join(shots, name)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s missing: %v", name, err)
		}
	}
	if os.Getenv("AGENTPLANE_UPDATE_SCREENSHOTS") == "1" {
		b, err := os.ReadFile(filepath.Join(shots, "agent.png"))
		if err == nil {
			err = os.MkdirAll(filepath.Join(root, "docs", "images"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "docs", "images", "console-agent.png"), b, 0o644)
		}
		if err != nil {
			t.Fatalf("update docs/images/console-agent.png: %v", err)
		}
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

// readOnlyToken is a token of the workspace's owner with the agents:read scope only.
func readOnlyToken(ctx context.Context, t *testing.T, p *agentplanetest.Platform) string {
	t.Helper()
	key, err := auth.EnsureSigningKey(ctx, p.Client(), platform.DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := auth.CreateKey(ctx, p.Client(), signer, auth.KeyRequest{
		Workspace: workspace, UserID: agentplanetest.TokenUser, Scopes: []string{auth.ScopeAgentsRead},
		Role: agentsv1.RoleOwner, Description: "console browser test, read only",
	})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
