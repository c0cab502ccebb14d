package facade_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

var _ = Describe("Budgets and limits", Ordered, func() {
	const ws = "limits-a"
	var admin, member, agent string

	agentObj := func() *agentsv1.Agent {
		GinkgoHelper()
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
		return a
	}

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "ada", Role: agentsv1.RoleAdmin},
			agentsv1.WorkspaceMember{UserID: "max", Role: agentsv1.RoleMember})
		admin = token(ws, "ada", agentsv1.RoleAdmin, auth.ScopeAgentsRead, auth.ScopeAgentsWrite)
		member = token(ws, "max", agentsv1.RoleMember, auth.ScopeAgentsRead, auth.ScopeAgentsWrite)
		agent = newAgentIn(admin, "limited")
	})

	It("sets and clears an agent's budget; kube-apiserver refuses a negative one", func() {
		r := call("PUT", "/v0/agents/"+agent+"/budget", admin, map[string]any{"tokensPerDay": 5000, "requestsPerMinute": 30})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body["budget"]).To(Equal(map[string]any{"tokensPerDay": 5000.0, "requestsPerMinute": 30.0, "costMicrosPerDay": 0.0}))
		Expect(agentObj().Spec.Budget).To(Equal(&agentsv1.ModelBudget{TokensPerDay: 5000, RequestsPerMinute: 30}))

		r = call("PUT", "/v0/agents/"+agent+"/budget", admin, map[string]any{"tokensPerDay": -1})
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(HavePrefix("Validation failed: budget.tokensPerDay: "))
		Expect(agentObj().Spec.Budget.TokensPerDay).To(Equal(int64(5000)), "unchanged")
		r = call("PUT", "/v0/agents/"+agent+"/budget", admin, `{"tokensPerDay": "lots"}`)
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(Equal(ops.MsgInvalidBudget))

		// A spend budget, in millionths of the suite's price table's currency.
		r = call("PUT", "/v0/agents/"+agent+"/budget", admin, map[string]any{"costMicrosPerDay": 5_000_000})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body["budget"]).To(HaveKeyWithValue("costMicrosPerDay", 5_000_000.0))
		Expect(agentObj().Spec.Budget).To(Equal(&agentsv1.ModelBudget{CostMicrosPerDay: 5_000_000}))
		r = call("PUT", "/v0/agents/"+agent+"/budget", admin, map[string]any{"costMicrosPerDay": -1})
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(HavePrefix("Validation failed: budget.costMicrosPerDay: "))

		Expect(call("PUT", "/v0/agents/"+agent+"/budget", admin, map[string]any{}).Status).To(Equal(200))
		Expect(agentObj().Spec.Budget).To(BeNil())
	})

	It("sets the workspace's budget", func() {
		r := call("PUT", "/v0/workspace/budget", admin, map[string]any{"tokensPerDay": 100000})
		Expect(r.Status).To(Equal(200), r.Raw)
		w := &agentsv1.Workspace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ws}, w)).To(Succeed())
		Expect(w.Spec.Budget).To(Equal(&agentsv1.ModelBudget{TokensPerDay: 100000}))
		r = call("PUT", "/v0/workspace/budget", admin, map[string]any{"requestsPerMinute": -5})
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(HavePrefix("Validation failed: budget.requestsPerMinute: "))
	})

	It("sets and clears an agent's memory limit, at least 256 MiB", func() {
		r := call("PUT", "/v0/agents/"+agent+"/resources", admin, map[string]any{"memoryLimit": "1Gi"})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body["memoryLimit"]).To(Equal("1Gi"))
		Expect(agentObj().Spec.Resources.Limits[corev1.ResourceMemory]).To(Equal(resource.MustParse("1Gi")))
		for _, bad := range []string{"512", "lots", "-1Gi"} {
			r = call("PUT", "/v0/agents/"+agent+"/resources", admin, map[string]any{"memoryLimit": bad})
			Expect(r.Status).To(Equal(400), bad)
			Expect(r.v0Error()).To(Equal(ops.MsgInvalidMemoryLimit))
		}
		Expect(call("PUT", "/v0/agents/"+agent+"/resources", admin, map[string]any{"memoryLimit": ""}).Status).To(Equal(200))
		Expect(agentObj().Spec.Resources).To(BeNil())
	})

	It("is for admins and owners: a member is refused, and another workspace's agent is not found", func() {
		for path, body := range map[string]any{
			"/v0/agents/" + agent + "/budget":    map[string]any{"tokensPerDay": 1},
			"/v0/agents/" + agent + "/resources": map[string]any{"memoryLimit": "1Gi"},
			"/v0/workspace/budget":               map[string]any{"tokensPerDay": 1},
		} {
			r := call("PUT", path, member, body)
			Expect(r.Status).To(Equal(403), path)
			Expect(r.v0Error()).To(Equal(ops.MsgPermissionDenied))
		}
		workspace("limits-b", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "bo", Role: agentsv1.RoleOwner})
		other := token("limits-b", "bo", agentsv1.RoleOwner, auth.ScopeAgentsRead, auth.ScopeAgentsWrite)
		r := call("PUT", "/v0/agents/"+agent+"/budget", other, map[string]any{"tokensPerDay": 1})
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(r.v0Error()).To(Equal(ops.MsgAgentNotFound))
	})
})
