package facade_test

import (
	"fmt"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

func agentOf(r reply) map[string]any {
	a, _ := r.Body["agent"].(map[string]any)
	return a
}

var _ = Describe("Agents", func() {
	var tok, viewer string
	ws := "agents-a"

	BeforeEach(func() {
		w := workspace(ws, agentsv1.PlanPro,
			agentsv1.WorkspaceMember{UserID: "ann", Role: agentsv1.RoleOwner},
			agentsv1.WorkspaceMember{UserID: "vic", Role: agentsv1.RoleViewer})
		if w.Spec.AgentLimit == nil {
			patch := client.MergeFrom(w.DeepCopy())
			w.Spec.AgentLimit = ptr.To[int32](50)
			Expect(k8sClient.Patch(ctx, w, patch)).To(Succeed())
		}
		tok = token(ws, "ann", "", auth.ScopeAll)
		viewer = token(ws, "vic", "", auth.ScopeAll)
	})

	It("creates an agent, waits for its gateway and lists it", func() {
		r := call("POST", "/v0/agents", tok, map[string]any{"name": "Helper", "description": "d", "emoji": "🦀"})
		Expect(r.Status).To(Equal(201), r.Raw)
		a := agentOf(r)
		Expect(a).To(HaveKeyWithValue("status", "running"))
		Expect(a).To(HaveKeyWithValue("name", "Helper"))
		Expect(a["id"]).To(HavePrefix("agt-"))
		Expect(a["endpoint"]).To(HavePrefix("http://127.0.0.1:"))

		list := call("GET", "/v0/agents", tok, nil)
		Expect(list.Raw).To(ContainSubstring(a["id"].(string)))
		Expect(call("GET", "/v0/agents/"+a["id"].(string), viewer, nil).Status).To(Equal(200))
	})

	It("answers 202 at once with wait=false", func() {
		r := call("POST", "/v0/agents?wait=false", tok, map[string]any{"name": "Quick"})
		Expect(r.Status).To(Equal(202), r.Raw)
		Expect(agentOf(r)["status"]).To(Equal("starting"))
	})

	DescribeTable("refuses bad names with 400",
		func(body string, msg string) {
			r := call("POST", "/v0/agents", tok, body)
			Expect(r.Status).To(Equal(400), r.Raw)
			Expect(r.v0Error()).To(Equal(msg))
		},
		Entry("missing", `{}`, "Name is required"),
		Entry("empty", `{"name":""}`, "Name is required"),
		Entry("blank", `{"name":"   "}`, "Name is required"),
		Entry("101 characters", `{"name":"`+strings.Repeat("é", 101)+`"}`, "Name must be at most 100 characters"),
		Entry("angle brackets", `{"name":"<b>x</b>"}`, "Name contains invalid characters"),
		Entry("a control character", `{"name":"a\u0007b"}`, "Name contains invalid characters"),
		Entry("a backtick", "{\"name\":\"a`b\"}", "Name contains invalid characters"),
		Entry("wrong type", `{"name":5}`, "Invalid request body"),
		Entry("not JSON", `name=x`, "Invalid request body"),
	)

	It("accepts exactly 100 characters", func() {
		Expect(call("POST", "/v0/agents?wait=false", tok, map[string]any{"name": strings.Repeat("é", 100)}).Status).To(Equal(202))
	})

	It("refuses writes to viewers and unknown versions", func() {
		Expect(call("POST", "/v0/agents", viewer, map[string]any{"name": "x"}).Status).To(Equal(403))
		r := call("POST", "/v0/agents", tok, map[string]any{"name": "x", "engineVersion": "1.0.0"})
		Expect(r.Status).To(Equal(400))
		Expect(r.v0Error()).To(Equal("Invalid version"))
	})

	It("answers Gateway failed to start with the agent, which stays listed and restartable", func() {
		r := call("POST", "/v0/agents", tok, map[string]any{"name": "Broken", "engineVersion": versionBrokenStart})
		Expect(r.Status).To(Equal(500), r.Raw)
		Expect(r.v0Error()).To(Equal("Gateway failed to start"))
		a := agentOf(r)
		Expect(a).To(HaveKeyWithValue("status", "not_running"))
		Expect(a).To(HaveKeyWithValue("statusReason", "GatewayCrashed"))
		id := a["id"].(string)
		Expect(call("GET", "/v0/agents", tok, nil).Raw).To(ContainSubstring(id))

		fixed := call("POST", "/v0/agents/"+id+"/restart", tok, map[string]string{"version": engine.PinnedVersion})
		Expect(fixed.Status).To(Equal(200), fixed.Raw)
		Expect(agentOf(fixed)).To(HaveKeyWithValue("status", "running"))
	})

	It("restarts, and refuses an unknown version", func() {
		id := agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "Restartable"}))["id"].(string)
		r := call("POST", "/v0/agents/"+id+"/restart", tok, map[string]string{"version": "9.9.9"})
		Expect(r.Status).To(Equal(400))
		Expect(r.v0Error()).To(Equal("Invalid version"))
		r = call("POST", "/v0/agents/"+id+"/restart", tok, map[string]string{"version": "2026.9.7"})
		Expect(r.Status).To(Equal(200), r.Raw)
		got := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: id}, got)).To(Succeed())
		Expect(got.Spec.Engine.Version).To(Equal("2026.9.7"))
		Expect(got.Status.LastRestartAt).NotTo(BeNil())
		v := call("GET", "/v0/agents/"+id+"/versions", tok, nil)
		Expect(v.Body["available"]).To(ContainElements(engine.PinnedVersion, "2026.9.7"))
	})

	It("answers CLI error when the engine's CLI fails", func() {
		id := agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "No CLI", "engineVersion": versionBrokenCLI}))["id"].(string)
		r := call("GET", "/v0/agents/"+id+"/devices", tok, nil)
		Expect(r.Status).To(Equal(500), r.Raw)
		Expect(r.v0Error()).To(Equal("CLI error"))
	})

	It("lists devices and mints a platform token for the agent", func() {
		id := agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "Devices"}))["id"].(string)
		r := call("GET", "/v0/agents/"+id+"/devices", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Body).To(HaveKey("paired"))
		pt := call("POST", "/v0/agents/"+id+"/platform/token", tok, nil)
		Expect(pt.Status).To(Equal(201), pt.Raw)
		me := call("GET", "/v0/me", pt.Body["token"].(string), nil)
		Expect(me.Status).To(Equal(200), me.Raw)
		Expect(me.Body["userId"]).To(Equal("agent:" + id))
	})

	It("lets a gateway token act on its own agent only, and refuses it after rotation", func() {
		a := agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "Tokens"}))
		b := agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "Other"}))
		gw := call("GET", "/v0/agents/"+a["id"].(string)+"/gateway-token", tok, nil).Body["token"].(string)
		Expect(gw).To(HavePrefix("gw_"))
		Expect(call("GET", "/v0/agents/"+a["id"].(string), gw, nil).Status).To(Equal(200))
		Expect(call("GET", "/v0/agents/"+b["id"].(string), gw, nil).Status).To(Equal(404), "another agent is reported as missing")
		Expect(call("GET", "/v0/agents", gw, nil).Status).To(Equal(403))
		Expect(call("GET", "/v0/agents/"+a["id"].(string)+"/gateway-token", gw, nil).Status).To(Equal(403), "the token-reading route does not take gateway tokens")

		fresh := call("POST", "/v0/agents/"+a["id"].(string)+"/gateway-token/rotate", gw, nil)
		Expect(fresh.Status).To(Equal(200))
		Expect(call("GET", "/v0/agents/"+a["id"].(string), gw, nil).Status).To(Equal(401))
		Expect(call("GET", "/v0/agents/"+a["id"].(string), fresh.Body["token"].(string), nil).Status).To(Equal(200))
	})

	It("hides other workspaces' agents as 404", func() {
		id := agentOf(call("POST", "/v0/agents?wait=false", tok, map[string]any{"name": "Private"}))["id"].(string)
		workspace("agents-b", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "bob", Role: agentsv1.RoleOwner})
		other := token("agents-b", "bob", "", auth.ScopeAll)
		for _, route := range []string{"GET /v0/agents/" + id, "DELETE /v0/agents/" + id, "POST /v0/agents/" + id + "/restart",
			"GET /v0/agents/" + id + "/devices", "POST /v0/agents/" + id + "/console/exec", "GET /v0/agents/" + id + "/config"} {
			method, path, _ := strings.Cut(route, " ")
			body := any(nil)
			if strings.HasSuffix(path, "exec") {
				body = map[string]string{"command": "ls"}
			}
			r := call(method, path, other, body)
			Expect(r.Status).To(Equal(404), route+": "+r.Raw)
			Expect(r.v0Error()).To(Equal("Agent not found"))
		}
	})

	It("deletes an agent and frees its slot", func() {
		id := agentOf(call("POST", "/v0/agents", tok, map[string]any{"name": "Doomed"}))["id"].(string)
		Expect(call("DELETE", "/v0/agents/"+id, tok, nil).Status).To(Equal(200))
		Eventually(func() int { return call("GET", "/v0/agents/"+id, tok, nil).Status }).Should(Equal(404))
		Eventually(func() []agentsv1.Reservation {
			w := &agentsv1.Workspace{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ws}, w)).To(Succeed())
			return w.Status.AgentSlots.Pending
		}).ShouldNot(ContainElement(HaveField("Name", id)))
	})

	It("creates agents from published templates only", func() {
		for _, t := range []agentsv1.AgentTemplate{
			{ObjectMeta: metav1.ObjectMeta{Name: "tpl-pub"}, Spec: agentsv1.AgentTemplateSpec{Slug: "researcher", DisplayName: "Researcher", State: agentsv1.TemplatePublished, AgentProfile: agentsv1.AgentProfile{Vibe: "curious"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "tpl-old"}, Spec: agentsv1.AgentTemplateSpec{Slug: "retired", DisplayName: "Retired", State: agentsv1.TemplateArchived}},
		} {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &t))).To(Succeed())
		}
		list := call("GET", "/v0/templates", tok, nil)
		Expect(list.Raw).To(ContainSubstring("researcher"))
		Expect(list.Raw).NotTo(ContainSubstring("retired"))

		r := call("POST", "/v0/agents?wait=false", tok, map[string]any{"template": "researcher"})
		Expect(r.Status).To(Equal(202), r.Raw)
		Expect(agentOf(r)).To(HaveKeyWithValue("name", "Researcher"))
		Expect(agentOf(r)).To(HaveKeyWithValue("vibe", "curious"))
		Expect(agentOf(r)).To(HaveKeyWithValue("template", "tpl-pub"))
		for _, body := range []map[string]any{{"templateId": "tpl-old"}, {"template": "retired"}, {"templateId": "nope"}} {
			r := call("POST", "/v0/agents", tok, body)
			Expect(r.Status).To(Equal(404), r.Raw)
			Expect(r.v0Error()).To(Equal("Template not found"))
		}
	})
})

var _ = Describe("The agent limit", func() {
	It("holds under 20 concurrent creates on two facade replicas", func() {
		w := workspace("limit-a", agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "lee", Role: agentsv1.RoleOwner})
		Expect(w.EffectiveAgentLimit()).To(Equal(3))
		tok := token("limit-a", "lee", "", auth.ScopeAll)
		_, second := startPlatform(ctx, platform.Options{APIOnly: true})
		var wg sync.WaitGroup
		results := make(chan reply, 20)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				url := baseURL
				if i%2 == 1 {
					url = second
				}
				results <- callURL(url, "POST", "/v0/agents?wait=false", tok, map[string]any{"name": fmt.Sprintf("racer %d", i)})
			}()
		}
		wg.Wait()
		close(results)
		count := map[int]int{}
		for r := range results {
			count[r.Status]++
			if r.Status == 403 {
				Expect(r.v0Error()).To(Equal("Agent limit reached"))
			}
		}
		Expect(count).To(Equal(map[int]int{202: 3, 403: 17}))
		var agents agentsv1.AgentList
		Expect(k8sClient.List(ctx, &agents, client.InNamespace("limit-a"))).To(Succeed())
		Expect(agents.Items).To(HaveLen(3))
	})
})
