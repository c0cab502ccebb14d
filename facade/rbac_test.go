package facade_test

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// The generated ClusterRole must be enough: a platform whose every request is made as the
// manager's service account, bound to config/rbac/role.yaml and nothing else, serves the
// main flows without a single refused request (envtest runs with RBAC authorization).
var _ = Describe("The generated RBAC", Ordered, func() {
	const sysNS, sa = "rbac-system", "agentplane-controller-manager"
	var url string

	BeforeAll(func() {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		role := &rbacv1.ClusterRole{}
		Expect(yaml.Unmarshal(raw, role)).To(Succeed())
		role.Name = "rbac-test-manager"
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, role))).To(Succeed())
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}}))).To(Succeed())
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: sysNS}},
		}))).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "agentplane-secrets-key", Namespace: sysNS},
			Data:       map[string][]byte{"key": []byte("0123456789abcdef0123456789abcdef")},
		})).To(Succeed())

		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + sysNS + ":" + sa}
		fake, err := fakeclaw.EngineDir()
		Expect(err).NotTo(HaveOccurred())
		// Its controllers reconcile every namespace: it must be gone before other specs run, or
		// their agents would get a second gateway and their snapshots a second archiver.
		pctx, cancel := context.WithCancel(ctx)
		p, u, done := startPlatformWith(pctx, cfg, platform.Options{
			SystemNamespace: sysNS, SkipNameValidation: true,
			// Ports of its own: the suite's platform allocates from the default range.
			Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, StateDir: GinkgoT().TempDir(),
				EngineDirs: map[string]string{engine.PinnedVersion: fake}, Ports: local.PortRange{First: 20000, Last: 20499}},
		})
		DeferCleanup(func() {
			cancel()
			Eventually(done).Should(BeClosed())
		})
		url = u
		workspace("rbac-ws", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "rita", Role: agentsv1.RoleOwner})
		tok, _, err := auth.CreateKey(ctx, k8sClient, p.Signer, auth.KeyRequest{Workspace: "rbac-ws", UserID: "rita", Scopes: []string{auth.ScopeAll}})
		Expect(err).NotTo(HaveOccurred())
		rbacToken = tok
	})

	It("serves agents, secrets, domains, files and signatures as the manager's service account", func() {
		for _, step := range []struct {
			method, path string
			body         any
			want         int
		}{
			{"GET", "/v0/me", nil, 200},
			{"POST", "/v0/secrets", map[string]string{"name": "RBAC_KEY", "value": "v"}, 201},
			{"GET", "/v0/secrets", nil, 200},
			{"GET", "/v0/templates", nil, 200},
			{"GET", "/v3/files/public", nil, 200},
		} {
			r := callURL(url, step.method, step.path, rbacToken, step.body)
			Expect(r.Status).To(Equal(step.want), "%s %s: %s", step.method, step.path, r.Raw)
		}
		created := callURL(url, "POST", "/v0/agents", rbacToken, map[string]any{"name": "RBAC agent"})
		Expect(created.Status).To(Equal(201), created.Raw)
		id := agentOf(created)["id"].(string)
		for _, step := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/v0/agents/" + id + "/console/exec", map[string]string{"command": "true"}},
			{"POST", "/v0/agents/" + id + "/domains", map[string]string{"subdomain": "rbac-check"}},
			{"POST", "/v0/agents/" + id + "/gateway-token/rotate", nil},
			{"POST", "/v0/agents/" + id + "/platform/token", nil},
			{"POST", "/v0/agents/" + id + "/restart", nil},
			{"DELETE", "/v0/agents/" + id, nil},
		} {
			r := callURL(url, step.method, step.path, rbacToken, step.body)
			Expect(r.Status).To(BeNumerically("<", 300), "%s %s: %s", step.method, step.path, r.Raw)
		}
		Eventually(func() int { return callURL(url, "GET", "/v0/agents/"+id, rbacToken, nil).Status }).Should(Equal(404))
	})
})

var rbacToken string
