package facade_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

var _ = Describe("Issues (closed beta)", func() {
	It("answers 404 to accounts that are not internal, and keeps issues for internal ones", func() {
		workspace("issues-ext", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "eve", Role: agentsv1.RoleOwner})
		outsider := token("issues-ext", "eve", "", auth.ScopeAll)
		for _, r := range []reply{call("GET", "/v0/issues", outsider, nil), call("POST", "/v0/issues", outsider, map[string]string{"title": "x"})} {
			Expect(r.Status).To(Equal(404), r.Raw)
			Expect(r.v0Error()).To(Equal("Not found"))
		}

		ws := workspace("issues-int", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "ian", Role: agentsv1.RoleOwner})
		patch := client.MergeFrom(ws.DeepCopy())
		ws.Spec.Internal = true
		ws.Spec.AgentLimit = ptr.To[int32](5)
		Expect(k8sClient.Patch(ctx, ws, patch)).To(Succeed())
		insider := token("issues-int", "ian", "", auth.ScopeAll)
		Eventually(func() int { return call("GET", "/v0/issues", insider, nil).Status }).Should(Equal(200))
		r := call("POST", "/v0/issues", insider, map[string]string{"title": "Gateway slow to boot", "body": "details"})
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(call("POST", "/v0/issues", insider, map[string]string{"title": "  "}).Status).To(Equal(400))
		Expect(call("POST", "/v0/issues", insider, map[string]string{"title": "t", "agentId": "agt-nope"}).Status).To(Equal(404))
		list := call("GET", "/v0/issues", insider, nil)
		Expect(list.Raw).To(ContainSubstring("Gateway slow to boot"))
		Expect(list.Raw).To(ContainSubstring(`"reporter":"ian"`))
	})
})
