package facade_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// The official pinata SDK must work unchanged against the facade. The Node test installs the
// pinned pinata and ethers packages into a cache directory (hack/npm-cache.sh) and runs with
// node's built-in test runner.
var _ = Describe("The pinata SDK", func() {
	It("passes its test suite against the facade", func() {
		for _, tool := range []string{"node", "npm"} {
			_, err := exec.LookPath(tool)
			Expect(err).NotTo(HaveOccurred(), "%s is required for the SDK test", tool)
		}
		root := testenv.RepoRoot()
		install := exec.CommandContext(ctx, filepath.Join(root, "hack", "npm-cache.sh"), "pinata-sdk", filepath.Join(root, "test", "sdk"))
		install.Stderr = GinkgoWriter
		out, err := install.Output()
		Expect(err).NotTo(HaveOccurred(), "installing the SDK from npm")
		dir := strings.TrimSpace(string(out))

		workspace("sdk-a", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "sam", Role: agentsv1.RoleOwner})
		workspace("sdk-b", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "sid", Role: agentsv1.RoleOwner})
		node := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", filepath.Join(dir, "pinata.test.mjs"))
		node.Dir = dir
		node.Env = append(os.Environ(),
			"AGENTPLANE_URL="+baseURL,
			"AGENTPLANE_TOKEN="+token("sdk-a", "sam", "", auth.ScopeFilesWrite),
			"AGENTPLANE_OTHER_TOKEN="+token("sdk-b", "sid", "", auth.ScopeFilesWrite),
		)
		var stdout strings.Builder
		node.Stdout, node.Stderr = io.MultiWriter(&stdout, GinkgoWriter), GinkgoWriter
		node.WaitDelay = 5 * time.Second
		Expect(node.Run()).To(Succeed(), "the pinata SDK test failed; see its output above")
		Expect(stdout.String()).To(MatchRegexp(`(?m)^ℹ pass 6$`), "every SDK test ran and passed")
		Expect(stdout.String()).To(MatchRegexp(`(?m)^ℹ fail 0$`))
	})
})
