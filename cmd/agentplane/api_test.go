package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
	apclient "github.com/agentplane/agentplane/pkg/client"
)

// cliResult is what one run of the command line printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the agentplane command line in this process, as main does (without replacing
// the process's logger, which the platform under test uses).
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	root := newRootCommand()
	root.PersistentPreRun = nil
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := 0
	if err := root.ExecuteContext(ctx); err != nil {
		code = reportError(&errOut, err)
	}
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
}

// ok runs args and fails the test unless they exit 0.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, args...)
	if r.code != 0 {
		t.Fatalf("agentplane %s: exit %d, stderr %q", shown(args), r.code, r.stderr)
	}
	return r.stdout
}

// fails runs args and checks the exit code and the line on stderr.
func fails(t *testing.T, code int, stderr string, args ...string) {
	t.Helper()
	r := runCLI(t, args...)
	if r.code != code || strings.TrimSpace(r.stderr) != stderr {
		t.Fatalf("agentplane %s: exit %d, stderr %q; want exit %d, %q", shown(args), r.code, r.stderr, code, stderr)
	}
}

// shown is a command line for a failure message, without the token's value.
func shown(args []string) string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && out[i-1] == "--token" {
			out[i] = "<token>"
		}
	}
	return strings.Join(out, " ")
}

// The client subcommands against a running facade (envtest, the engine double).
func TestClientCommands(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := agentplanetest.NewEnvironment()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS): %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	p, err := agentplanetest.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop platform: %v", err)
		}
	})
	token, err := p.Token("cli-test")
	if err != nil {
		t.Fatal(err)
	}
	// Nothing of the environment of the machine running the test.
	t.Setenv("AGENTPLANE_URL", "")
	t.Setenv("AGENTPLANE_TOKEN", "")
	conn := []string{"--url", p.URL(), "--token", token}
	with := func(args ...string) []string { return append(args, conn...) }

	var agentID string
	if !t.Run("agents", func(t *testing.T) {
		var created apclient.Agent
		mustJSON(t, ok(t, with("agents", "create", "--name", "cli-demo", "-o", "json")...), &created)
		if created.Name != "cli-demo" || !strings.HasPrefix(created.Id, "agt-") {
			t.Fatalf("created %+v", created)
		}
		agentID = created.Id

		table := ok(t, with("agents", "list")...)
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID NAME STATUS TEMPLATE ENGINE CREATED" {
			t.Fatalf("agents list table:\n%s", table)
		}
		if row := strings.Fields(lines[1]); row[0] != agentID || row[1] != "cli-demo" {
			t.Fatalf("agents list row %q", lines[1])
		}
		var listed []apclient.Agent
		mustJSON(t, ok(t, with("agents", "list", "-o", "json")...), &listed)
		if len(listed) != 1 || listed[0].Id != agentID {
			t.Fatalf("agents list -o json: %+v", listed)
		}
		listed = nil
		if err := yaml.Unmarshal([]byte(ok(t, with("agents", "list", "--output", "yaml")...)), &listed); err != nil || len(listed) != 1 || listed[0].Id != agentID {
			t.Fatalf("agents list -o yaml: %+v, %v", listed, err)
		}
		var got apclient.Agent
		if err := yaml.Unmarshal([]byte(ok(t, with("agents", "get", agentID, "-o", "yaml")...)), &got); err != nil || got.Id != agentID || got.Name != "cli-demo" {
			t.Fatalf("agents get -o yaml: %+v, %v", got, err)
		}

		mustJSON(t, ok(t, with("agents", "suspend", agentID, "-o", "json")...), &got)
		if got.Suspended == nil || !*got.Suspended || got.Status != "suspended" {
			t.Fatalf("after suspend: suspended %v, status %q", got.Suspended, got.Status)
		}
		got = apclient.Agent{} // fields the answer omits must not keep the last answer's values
		mustJSON(t, ok(t, with("agents", "resume", agentID, "-o", "json")...), &got)
		if got.Suspended != nil && *got.Suspended || got.Status == "suspended" {
			t.Fatalf("after resume: suspended %v, status %q", got.Suspended, got.Status)
		}
		mustJSON(t, ok(t, with("agents", "restart", agentID, "-o", "json")...), &got)
		if got.Id != agentID {
			t.Fatalf("restart answered %+v", got)
		}
	}) {
		return // the other subtests use its agent
	}

	t.Run("secrets", func(t *testing.T) {
		valueFile := filepath.Join(t.TempDir(), "value")
		if err := os.WriteFile(valueFile, []byte("file-secret-value"), 0o600); err != nil {
			t.Fatal(err)
		}
		out := ok(t, with("secrets", "create", "--name", "from-file", "--from-file", valueFile)...)
		if strings.Contains(out, "file-secret-value") {
			t.Fatal("secrets create printed the value")
		}
		var s apclient.Secret
		mustJSON(t, ok(t, with("secrets", "create", "--name", "openai", "--value", "flag-secret-value", "--provider", "openai", "-o", "json")...), &s)
		if s.Name != "openai" || s.EnvName != "OPENAI" {
			t.Fatalf("created %+v", s)
		}
		var a apclient.Agent
		mustJSON(t, ok(t, with("secrets", "attach", agentID, s.Id, "-o", "json")...), &a)
		if len(a.Secrets) != 1 || a.Secrets[0] != s.Id {
			t.Fatalf("after attach the agent has secrets %v", a.Secrets)
		}
		table := ok(t, with("secrets", "list")...)
		if strings.Contains(table, "secret-value") {
			t.Fatal("secrets list printed a value")
		}
		var listed []apclient.Secret
		mustJSON(t, ok(t, with("secrets", "list", "-o", "json")...), &listed)
		if len(listed) != 2 {
			t.Fatalf("secrets list: %+v", listed)
		}
		for _, l := range listed {
			if l.Id == s.Id && (len(l.AttachedTo) != 1 || l.AttachedTo[0] != agentID) {
				t.Fatalf("secret %s attached to %v", l.Id, l.AttachedTo)
			}
		}
		a = apclient.Agent{}
		mustJSON(t, ok(t, with("secrets", "detach", agentID, s.Id, "-o", "json")...), &a)
		if len(a.Secrets) != 0 {
			t.Fatalf("after detach the agent has secrets %v", a.Secrets)
		}
		ok(t, with("secrets", "delete", s.Id)...)
		listed = nil
		mustJSON(t, ok(t, with("secrets", "list", "-o", "json")...), &listed)
		if len(listed) != 1 || listed[0].Name != "from-file" {
			t.Fatalf("after delete: %+v", listed)
		}
		fails(t, 1, "agentplane: 404 Secret not found", with("secrets", "delete", s.Id)...)
	})

	t.Run("errors", func(t *testing.T) {
		fails(t, 1, "agentplane: 404 Agent not found", with("agents", "get", "agt-missing")...)
		fails(t, 1, "agentplane: 401 Invalid token", "agents", "list", "--url", p.URL(), "--token", "not-a-token")
		empty := t.TempDir()
		r := runCLI(t, "agents", "list", "--state-dir", empty)
		if r.code != 2 || !strings.Contains(r.stderr, "no API URL") {
			t.Fatalf("without a URL: exit %d, stderr %q", r.code, r.stderr)
		}
		r = runCLI(t, "agents", "list", "--url", p.URL(), "--state-dir", empty)
		if r.code != 2 || !strings.Contains(r.stderr, "no API token") {
			t.Fatalf("without a token: exit %d, stderr %q", r.code, r.stderr)
		}
		if strings.Contains(r.stderr+r.stdout, token) {
			t.Fatal("the token was printed")
		}
	})

	t.Run("connection from the environment and dev.env", func(t *testing.T) {
		stateDir := t.TempDir()
		if err := devenv.WriteEnvFile(filepath.Join(stateDir, devenv.EnvFileName), "", p.URL(), token); err != nil {
			t.Fatal(err)
		}
		var listed []apclient.Agent
		mustJSON(t, ok(t, "agents", "list", "--state-dir", stateDir, "-o", "json"), &listed)
		if len(listed) != 1 {
			t.Fatalf("agents list via dev.env: %+v", listed)
		}
		t.Setenv("AGENTPLANE_URL", p.URL())
		t.Setenv("AGENTPLANE_TOKEN", token)
		listed = nil
		mustJSON(t, ok(t, "agents", "list", "--state-dir", t.TempDir(), "-o", "json"), &listed)
		if len(listed) != 1 {
			t.Fatalf("agents list via the environment: %+v", listed)
		}
		// A flag wins over the environment.
		fails(t, 1, "agentplane: 401 Invalid token", "agents", "list", "--token", "not-a-token")
	})

	t.Run("logs", func(t *testing.T) {
		// The gateway's own start-up line, from the facade's logs route (TestLogsCommand tests
		// follow and the error event against a stub of the route).
		if out := ok(t, with("logs", agentID, "--tail", "50")...); !strings.Contains(out, "listening on") {
			t.Fatalf("logs --tail 50:\n%s", out)
		}
		fails(t, 1, "agentplane: 404 Agent not found", with("logs", "agt-missing", "--tail", "5")...)
	})

	t.Run("snapshots and delete", func(t *testing.T) {
		out := ok(t, with("snapshots", "list", agentID)...)
		if strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " ") != "ID CID SIZE CREATED" {
			t.Fatalf("snapshots list:\n%s", out)
		}
		var del struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
		}
		mustJSON(t, ok(t, with("agents", "delete", agentID, "-o", "json")...), &del)
		if del.ID != agentID || !del.Deleted {
			t.Fatalf("delete answered %+v", del)
		}
		// The agent goes once its finalizers ran.
		deadline := time.Now().Add(testenv.EventBound)
		for runCLI(t, with("agents", "get", agentID)...).code == 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		fails(t, 1, "agentplane: 404 Agent not found", with("agents", "get", agentID)...)
	})
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
}
