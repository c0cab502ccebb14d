package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// TestChatInChromium drives the agent page's chat pane (chat.test.mjs) against a platform
// whose model proxy forwards openai to a fake provider: a turn with a tool call, reopening a
// conversation, waking a sleeping agent, a budget's refusal. With
// AGENTPLANE_UPDATE_SCREENSHOTS=1 the pane's screenshot is copied to
// docs/images/console-chat.png (the README shows it).
func TestChatInChromium(t *testing.T) {
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

	llm := providertest.New()
	t.Cleanup(llm.Close)
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
	p, err := agentplanetest.Start(ctx, cfg, agentplanetest.WithLogger(logr.Discard()),
		agentplanetest.WithModelProviders(map[string]string{"openai": llm.URL}))
	if err != nil {
		t.Fatalf("start agentplane: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop agentplane: %v", err)
		}
	})
	const ws = "console-chat"
	token, err := p.Token(ws)
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	talker := createAgent(t, p.URL(), token, "chat-demo")
	spender := createAgent(t, p.URL(), token, "budget-demo")
	a := &agentsv1.Agent{}
	if err := p.Client().Get(ctx, client.ObjectKey{Namespace: ws, Name: spender}, a); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(a.DeepCopy())
	a.Spec.Budget = &agentsv1.ModelBudget{TokensPerDay: 1}
	if err := p.Client().Patch(ctx, a, patch); err != nil {
		t.Fatal(err)
	}

	shots := os.Getenv("AGENTPLANE_SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	node := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "--test-concurrency=1", filepath.Join(dir, "chat.test.mjs"))
	node.Dir = dir
	node.Env = append(os.Environ(), "AGENTPLANE_URL="+p.URL(), "AGENTPLANE_TOKEN="+token, "CHROMIUM="+chromium,
		"SCREENSHOT_DIR="+shots, "CHAT_AGENT="+talker, "BUDGET_AGENT="+spender)
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
		t.Fatalf("the chat's browser test failed (%v); see its output above", runErr)
	}
	if !regexp.MustCompile(`(?m)^ℹ fail 0$`).MatchString(stdout.String()) ||
		!regexp.MustCompile(`(?m)^ℹ pass 5$`).MatchString(stdout.String()) {
		t.Fatalf("not every chat browser test ran and passed:\n%s", stdout.String())
	}
	shot := filepath.Join(shots, "chat.png")
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("screenshot chat.png missing: %v", err)
	}
	if os.Getenv("AGENTPLANE_UPDATE_SCREENSHOTS") == "1" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(filepath.Join(root, "docs", "images", "console-chat.png"), b, 0o644)
		}
		if err != nil {
			t.Fatalf("update docs/images/console-chat.png: %v", err)
		}
	}
}

// createAgent creates an agent through the REST facade (which answers once it runs) and
// returns its id.
func createAgent(t *testing.T, url, token, name string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name})
	req, _ := http.NewRequest("POST", url+"/v0/agents", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Agent struct{ ID string } `json:"agent"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &got) != nil || got.Agent.ID == "" {
		t.Fatalf("create agent %s: %d %s", name, resp.StatusCode, raw)
	}
	return got.Agent.ID
}
