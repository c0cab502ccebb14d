package facade_test

import (
	"time"

	"github.com/golang-jwt/jwt/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

var _ = Describe("Authentication", func() {
	var good string

	BeforeEach(func() {
		workspace("auth-a", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "alice", Role: agentsv1.RoleOwner})
		workspace("auth-b", agentsv1.PlanFree)
		good = token("auth-a", "alice", "", auth.ScopeAgentsRead)
	})

	It("lets a valid token in and resolves the caller from its ApiKey and workspace", func() {
		r := call("GET", "/v0/me", good, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body).To(HaveKeyWithValue("userId", "alice"))
		Expect(r.Body).To(HaveKeyWithValue("workspace", "auth-a"))
		Expect(r.Body).To(HaveKeyWithValue("role", "owner"))
	})

	DescribeTable("refuses with 401",
		func(header func() string, message string) {
			r := call("GET", "/v0/me", "", nil, "Authorization", header())
			Expect(r.Status).To(Equal(401), r.Raw)
			Expect(r.v0Error()).To(Equal(message))
		},
		Entry("no Authorization header", func() string { return "" }, "Unauthorized"),
		Entry("not a Bearer token", func() string { return "Basic YWxpY2U6cHc=" }, "Unauthorized"),
		Entry("an empty Bearer token", func() string { return "Bearer " }, "Unauthorized"),
		Entry("garbage", func() string { return "Bearer not.a.jwt" }, "Invalid token"),
		Entry("a bad signature", func() string {
			other, _ := auth.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
			tok, _ := other.Mint(auth.Claims{Workspace: "auth-a", RegisteredClaims: jwt.RegisteredClaims{Subject: "alice"}})
			return "Bearer " + tok
		}, "Invalid token"),
		Entry("an unknown key", func() string {
			tok, _ := plat.Signer.Mint(auth.Claims{Workspace: "auth-a", RegisteredClaims: jwt.RegisteredClaims{Subject: "alice", ID: "key-unknown"}})
			return "Bearer " + tok
		}, "Invalid token"),
		Entry("an expired token", func() string {
			past := plat.Signer.WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) })
			tok, _ := past.Mint(auth.Claims{Workspace: "auth-a", RegisteredClaims: jwt.RegisteredClaims{
				Subject: "alice", ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Hour)),
			}})
			return "Bearer " + tok
		}, "Token expired"),
	)

	It("refuses a token whose ApiKey expired", func() {
		tok, key, err := auth.CreateKey(ctx, k8sClient, plat.Signer, auth.KeyRequest{
			Workspace: "auth-a", UserID: "alice", Scopes: []string{auth.ScopeAgentsRead}, TTL: time.Hour,
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(call("GET", "/v0/me", tok, nil).Status).To(Equal(200))
		key.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(-time.Minute)}
		Expect(k8sClient.Update(ctx, key)).To(Succeed())
		Eventually(func() string { return call("GET", "/v0/me", tok, nil).v0Error() }).Should(Equal("Token expired"))
	})

	It("refuses a revoked token", func() {
		tok := token("auth-a", "alice", "", auth.ScopeAgentsRead)
		Expect(call("GET", "/v0/me", tok, nil).Status).To(Equal(200))
		claims, err := plat.Signer.Parse(tok)
		Expect(err).NotTo(HaveOccurred())
		key := &agentsv1.ApiKey{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: "auth-a", Name: claims.ID}, key)).To(Succeed())
		key.Spec.Revoked = true
		Expect(k8sClient.Update(ctx, key)).To(Succeed())
		Eventually(func() reply { return call("GET", "/v0/me", tok, nil) }).Should(And(
			HaveField("Status", 401), WithTransform(reply.v0Error, Equal("Token revoked"))))
	})

	It("refuses a token that claims another workspace than its key's", func() {
		claims, err := plat.Signer.Parse(good)
		Expect(err).NotTo(HaveOccurred())
		claims.Workspace = "auth-b"
		forged, err := plat.Signer.Mint(*claims)
		Expect(err).NotTo(HaveOccurred())
		r := call("GET", "/v0/me", forged, nil)
		Expect(r.Status).To(Equal(401))
	})

	It("refuses a token of another workspace than the one the client pins", func() {
		r := call("GET", "/v0/me", good, nil, "X-Agentplane-Workspace", "auth-b")
		Expect(r.Status).To(Equal(401))
		Expect(call("GET", "/v0/me", good, nil, "X-Agentplane-Workspace", "auth-a").Status).To(Equal(200))
	})

	It("answers Missing userId for a valid token without sub", func() {
		tok, _, err := auth.CreateKey(ctx, k8sClient, plat.Signer, auth.KeyRequest{
			Workspace: "auth-a", Scopes: []string{auth.ScopeAgentsRead}, Role: agentsv1.RoleMember,
		})
		Expect(err).NotTo(HaveOccurred())
		r := call("GET", "/v0/me", tok, nil)
		Expect(r.Status).To(Equal(401))
		Expect(r.v0Error()).To(Equal("Missing userId"))
	})

	It("answers 403 for a missing scope and for a user without a role", func() {
		noScope := token("auth-a", "alice", "", auth.ScopeFilesRead)
		r := call("GET", "/v0/me", noScope, nil)
		Expect(r.Status).To(Equal(403), r.Raw)

		stranger := token("auth-a", "mallory", "", auth.ScopeAgentsRead)
		r = call("GET", "/v0/me", stranger, nil)
		Expect(r.Status).To(Equal(403), r.Raw)
		Expect(r.v0Error()).To(Equal("Permission denied"))
	})

	It("answers /v3 auth failures in the v3 envelope", func() {
		r := call("GET", "/v3/data/testAuthentication", "", nil)
		Expect(r.Status).To(Equal(401))
		code, msg := r.v3Error()
		Expect(code).To(Equal(401.0))
		Expect(msg).To(Equal("Unauthorized"))
	})
})
