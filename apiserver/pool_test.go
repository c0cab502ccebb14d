package apiserver_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/auth"
)

// A warm pool behind the REST door (local runtime, the engine double): a created agent takes
// a booted gateway, says so in its events, and works like a cold one.
var _ = Describe("Warm pool", Ordered, func() {
	const ws = "pool-a"
	var tok string
	gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "rest-pool"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 1}}

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "pat", Role: agentsv1.RoleOwner})
		tok = token(ws, "pat", agentsv1.RoleOwner, auth.ScopeAgentsRead, auth.ScopeAgentsWrite, auth.ScopeAgentsExec)
		Expect(k8sClient.Create(ctx, gp)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, gp))).To(Succeed()) })
		Eventually(func() int32 {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
			return gp.Status.Ready
		}).Should(Equal(int32(1)))
	})

	It("binds a created agent to a warm gateway: a Claimed event, its own workspace, and the pool refills", func() {
		id := newAgentIn(tok, "pooled")
		Eventually(func() []string {
			var evs eventsv1.EventList
			Expect(k8sClient.List(ctx, &evs, client.InNamespace(ws))).To(Succeed())
			var notes []string
			for _, e := range evs.Items {
				if e.Regarding.Name == id {
					notes = append(notes, e.Reason+": "+e.Note)
				}
			}
			return notes
		}).Should(ContainElement(And(HavePrefix("Claimed: took the warm gateway rest-pool/"), HaveSuffix("and bound the agent to it"))))
		Expect(strings.TrimSpace(shell(tok, id, "pwd"))).To(HaveSuffix("/workspace"))
		Eventually(func() []int64 {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
			return []int64{gp.Status.Claimed, int64(gp.Status.Ready)}
		}).Should(Equal([]int64{1, 1}), "one claimed, and the pool refilled")
		Expect(call("DELETE", "/v0/agents/"+id, tok, nil).Status).To(Equal(200))
	})
})
