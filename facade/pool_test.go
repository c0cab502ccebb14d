package facade_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// A warm pool behind the REST door (local runtime, the engine double): a created agent takes
// a booted gateway, says so in its events, and works like a cold one.
var _ = Describe("Warm pool", Ordered, func() {
	const ws = "pool-a"
	var tok string
	gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "rest-pool"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 1}}

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "pat", Role: agentsv1.RoleOwner})
		tok = token(ws, "pat", agentsv1.RoleOwner, auth.ScopeAgentsRead, auth.ScopeAgentsWrite, auth.ScopeAgentsExec, auth.ScopeSecretsWrite)
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

	It("gives a created agent the token of the warm gateway reserved for it, which serves it at once", func() {
		// The ready member's own token, from its config, before the agent exists.
		var cfgs []string
		Eventually(func() []string {
			cfgs, _ = filepath.Glob(filepath.Join(runtimeStateDir, "pool", gp.Name+"-*", "home", ".openclaw", "openclaw.json"))
			return cfgs
		}).Should(HaveLen(1), "one ready member, the deleted agent's gone")
		memberDir := filepath.Dir(filepath.Dir(filepath.Dir(cfgs[0])))
		memberToken := configToken(cfgs[0])

		id := newAgentIn(tok, "reserved")
		a := &agentsv1.Agent{}
		Eventually(func() agentsv1.AgentPhase {
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: id}, a)).To(Succeed())
			return a.Status.Phase
		}).Should(Equal(agentsv1.AgentRunning))
		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: a.Status.GatewayTokenSecret}, sec)).To(Succeed())
		Expect(string(sec.Data[agentsv1.GatewayTokenDataKey])).To(Equal(memberToken), "the agent's token is the member's")
		Expect(strings.TrimSpace(shell(tok, id, "pwd"))).To(HavePrefix(memberDir+"/home/"), "the agent runs in the member's home")
		Expect(toolsInvoke(a.Status.Endpoint, memberToken)).To(Equal(http.StatusNotFound), "the gateway accepts the agent's token")
		Expect(call("DELETE", "/v0/agents/"+id, tok, nil).Status).To(Equal(200))
	})

	It("leaves the warm gateway to agents that can take it: one applied with an attached secret starts cold", func() {
		Eventually(func() int32 {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
			return gp.Status.Ready
		}).Should(Equal(int32(1)), "the pool refilled after the last claim")
		var cfgs []string
		Eventually(func() []string {
			cfgs, _ = filepath.Glob(filepath.Join(runtimeStateDir, "pool", gp.Name+"-*", "home", ".openclaw", "openclaw.json"))
			return cfgs
		}).Should(HaveLen(1), "one ready member")
		memberDir := filepath.Dir(filepath.Dir(filepath.Dir(cfgs[0])))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		claimed := gp.Status.Claimed

		sec := call("POST", "/v0/secrets", tok, map[string]string{"name": "POOL_PASSPHRASE", "value": "needs-a-restart"})
		Expect(sec.Status).To(Equal(201), sec.Raw)
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "with-secret"},
			Spec: agentsv1.AgentSpec{DisplayName: "With secret",
				Secrets: []agentsv1.LocalObjectReference{{Name: secretID(sec)}}},
		}
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Eventually(func() agentsv1.AgentPhase {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
			return a.Status.Phase
		}).Should(Equal(agentsv1.AgentRunning))
		Expect(strings.TrimSpace(shell(tok, a.Name, "pwd"))).NotTo(HavePrefix(memberDir+"/"), "it runs in a home of its own")
		Expect(filepath.Join(memberDir, "home", ".openclaw", "openclaw.json")).To(BeAnExistingFile(),
			"no gateway was reserved for it: the same member is still in the pool, not discarded")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		Expect(gp.Status.Claimed).To(Equal(claimed))
		Expect(call("DELETE", "/v0/agents/"+a.Name, tok, nil).Status).To(Equal(200))
	})
})

// configToken is gateway.auth.token of an engine config file.
func configToken(path string) string {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var cfg struct {
		Gateway struct {
			Auth struct {
				Token string `json:"token"`
			} `json:"auth"`
		} `json:"gateway"`
	}
	Expect(json.Unmarshal(b, &cfg)).To(Succeed())
	Expect(cfg.Gateway.Auth.Token).NotTo(BeEmpty())
	return cfg.Gateway.Auth.Token
}

// toolsInvoke is the status of POST /tools/invoke of a tool that does not exist on a gateway:
// 404 for an accepted token, 401 for another.
func toolsInvoke(endpoint, token string) int {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodPost, endpoint+"/tools/invoke", strings.NewReader(`{"tool":"nonexistent_tool","args":{}}`))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	return resp.StatusCode
}
