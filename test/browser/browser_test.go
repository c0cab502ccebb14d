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
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

const workspace = "console"

func TestConsoleInChromium(t *testing.T) {
	s := startSuite(t)
	token := s.token(t, workspace)
	readToken := readOnlyToken(s.ctx, t, s.p)
	s.run(t, "console.test.mjs", 13, "AGENTPLANE_TOKEN="+token, "AGENTPLANE_READ_TOKEN="+readToken)
	for _, name := range []string{"overview.png", "config.png"} {
		s.screenshot(t, name, "")
	}
	s.screenshot(t, "agent.png", "console-agent.png")
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
