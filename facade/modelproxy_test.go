package facade_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
)

// proxyCall sends one Anthropic Messages request through the facade's model proxy with an
// agent's proxy credential and returns the status and body.
func proxyCall(cred string, stream bool) (int, string) {
	GinkgoHelper()
	body := `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"ping"}]}`
	if stream {
		body = strings.Replace(body, `{`, `{"stream":true,`, 1)
	}
	req, err := http.NewRequest("POST", baseURL+"/llm/anthropic/v1/messages", strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("x-api-key", cred)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// suitePrices writes the suite's model price table and returns its path: claude-sonnet-4
// models at 3 and 15 USD per million input and output tokens.
func suitePrices() string {
	GinkgoHelper()
	f := filepath.Join(GinkgoT().TempDir(), "prices.yaml")
	Expect(os.WriteFile(f, []byte("currency: USD\nmodels:\n- provider: anthropic\n  model: claude-sonnet-4*\n  input: 3\n  output: 15\n"), 0o600)).To(Succeed())
	return f
}

// proxyEntry is models.providers.<provider> of the agent's engine config file (nil: absent).
func proxyEntry(tok, agent, provider string) map[string]any {
	_, cfg := engineConfig(tok, agent)
	models, _ := cfg["models"].(map[string]any)
	providers, _ := models["providers"].(map[string]any)
	entry, _ := providers[provider].(map[string]any)
	return entry
}

// The model proxy keeps provider keys out of agents: an attached anthropic key never reaches
// the gateway's environment or files, the agent's config points anthropic at the facade's
// /llm/ routes with a credential derived from its gateway token, and the proxy forwards with
// the real key, counts usage into status, enforces budgets, and refuses the credential at
// once when the secret is detached, the token rotated or the agent deleted.
var _ = Describe("Model proxy", Ordered, func() {
	const (
		ws  = "model-proxy"
		key = "sk-ant-api03-never-in-the-agent-7f3a9c"
	)
	var tok, agent, sid, cred string

	credential := func() string {
		GinkgoHelper()
		var c string
		Eventually(func() string {
			e := proxyEntry(tok, agent, "anthropic")
			c, _ = e["apiKey"].(string)
			return c
		}).Should(HavePrefix(agentsv1.ModelCredentialPrefix))
		return c
	}

	BeforeAll(func() {
		tok = snapshotWorkspace(ws)
		r := call("POST", "/v0/secrets", tok, map[string]string{"name": "ANTHROPIC_API_KEY", "value": key, "provider": "anthropic"})
		Expect(r.Status).To(Equal(201), r.Raw)
		sid = secretID(r)
		other := call("POST", "/v0/secrets", tok, map[string]string{"name": "GITHUB_TOKEN", "value": "ghp-reaches-the-agent", "provider": "github"})
		Expect(other.Status).To(Equal(201), other.Raw)
		agent = newAgentIn(tok, "Proxied")
		r = call("POST", "/v0/agents/"+agent+"/secrets", tok, map[string]any{"secretIds": []string{sid, secretID(other)}})
		Expect(r.Status).To(Equal(200), r.Raw)
		cred = credential()
	})

	It("points the provider at the proxy and keeps its key out of the agent", func() {
		e := proxyEntry(tok, agent, "anthropic")
		Expect(e["baseUrl"]).To(Equal(baseURL + "/llm/anthropic"))
		// Other secrets still reach the gateway's environment; the provider key does not.
		Eventually(func() string { return gatewayEnv(tok, agent, "GITHUB_TOKEN") }).Should(Equal("ghp-reaches-the-agent"))
		Expect(gatewayEnv(tok, agent, "ANTHROPIC_API_KEY")).To(BeEmpty())
		// Nothing the agent can read holds the key: its environment, its home, its config.
		out := shell(tok, agent, `env; cat /proc/$(cat ../../../gateway.pid)/environ | tr '\0' '\n'; grep -r -l -F '`+key+`' ../../.. || echo clean`)
		Expect(out).NotTo(ContainSubstring(key))
		Expect(out).To(ContainSubstring("clean"))
		r := call("GET", "/v0/agents/"+agent+"/config", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(r.Raw).NotTo(ContainSubstring(key))
		Expect(r.Raw).NotTo(ContainSubstring(cred))
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ws, Name: agent}, a)).To(Succeed())
		Expect(a.Status.Config.ModelProviders).To(ConsistOf("anthropic"))
	})

	It("forwards with the real key, streamed and not, and counts usage into status", func() {
		before := len(llm.Requests())
		status, body := proxyCall(cred, true)
		Expect(status).To(Equal(200), body)
		Expect(body).To(ContainSubstring("event: message_stop"))
		Expect(body).To(ContainSubstring(providertest.Reply))
		status, body = proxyCall(cred, false)
		Expect(status).To(Equal(200), body)
		reqs := llm.Requests()[before:]
		Expect(reqs).To(HaveLen(2))
		for _, q := range reqs {
			Expect(q.Key).To(Equal(key))
			Expect(q.Path).To(Equal("/v1/messages"))
		}
		Eventually(func(g Gomega) {
			a := &agentsv1.Agent{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ws, Name: agent}, a)).To(Succeed())
			g.Expect(a.Status.Usage).NotTo(BeNil())
			g.Expect(a.Status.Usage.Requests).To(BeEquivalentTo(2))
			g.Expect(a.Status.Usage.InputTokens).To(BeEquivalentTo(2 * providertest.InputTokens))
			g.Expect(a.Status.Usage.OutputTokens).To(BeEquivalentTo(2 * providertest.OutputTokens))
			g.Expect(a.Status.Usage.Day).To(Equal(time.Now().UTC().Format(time.DateOnly)))
			// Priced by the suite's table (suitePrices), in millionths of a dollar.
			cost := int64(2 * (providertest.InputTokens*3 + providertest.OutputTokens*15))
			g.Expect(a.Status.Usage.CostMicros).To(Equal(cost))
			g.Expect(a.Status.Usage.Currency).To(Equal("USD"))
			g.Expect(a.Status.Usage.UnpricedRequests).To(BeZero())
			g.Expect(a.Status.Usage.Models).To(Equal([]agentsv1.ModelTally{{Model: "claude-sonnet-4-6", Requests: 2,
				InputTokens: 2 * providertest.InputTokens, OutputTokens: 2 * providertest.OutputTokens, CostMicros: cost}}))
			w := &agentsv1.Workspace{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Name: ws}, w)).To(Succeed())
			g.Expect(w.Status.Usage).NotTo(BeNil())
			g.Expect(w.Status.Usage.Tokens()).To(BeEquivalentTo(2 * (providertest.InputTokens + providertest.OutputTokens)))
			g.Expect(w.Status.Usage.CostMicros).To(Equal(cost))
			g.Expect(w.Status.Usage.Models).To(HaveLen(1))
		}).Should(Succeed())
	})

	It("relays a stream through the facade event by event", func() {
		release := llm.Hold()
		defer release()
		body := `{"model":"claude-sonnet-4-6","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"ping"}]}`
		req, err := http.NewRequest("POST", baseURL+"/llm/anthropic/v1/messages", strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("x-api-key", cred)
		resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(200))
		// The provider holds the rest of its stream: the first event must arrive on its own.
		rd := bufio.NewReader(resp.Body)
		line, err := rd.ReadString('\n')
		Expect(err).NotTo(HaveOccurred())
		Expect(line).To(Equal("event: message_start\n"))
		release()
		rest, err := io.ReadAll(rd)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(rest)).To(ContainSubstring("event: message_stop"))
	})

	It("refuses a wrong or missing credential in the provider's shape", func() {
		for _, bad := range []string{"", key, cred[:len(cred)-3] + "AAA"} {
			status, body := proxyCall(bad, false)
			Expect(status).To(Equal(401), bad)
			Expect(body).To(ContainSubstring(`"type":"error"`))
			Expect(body).NotTo(ContainSubstring(key))
		}
	})

	It("forwards no route but the provider's inference routes", func() {
		before := len(llm.Requests())
		for _, route := range []struct{ method, path string }{
			{"POST", "/llm/anthropic/v1/files"},
			{"GET", "/llm/anthropic/v1/files"},
			{"POST", "/llm/anthropic/v1/messages/batches"},
			{"GET", "/llm/anthropic/v1/messages"},
		} {
			req, err := http.NewRequest(route.method, baseURL+route.path, strings.NewReader(`{}`))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("x-api-key", cred)
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(403), route.path)
			Expect(string(b)).To(ContainSubstring(`"type":"permission_error"`))
			Expect(string(b)).To(ContainSubstring("is not a model inference route"))
		}
		Expect(llm.Requests()[before:]).To(BeEmpty())
		status, body := proxyCall(cred, false)
		Expect(status).To(Equal(200), body)
	})

	It("answers 429 over a budget and serves again once the budget allows", func() {
		setBudget := func(obj client.Object, b *agentsv1.ModelBudget) {
			GinkgoHelper()
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
			switch o := obj.(type) {
			case *agentsv1.Agent:
				o.Spec.Budget = b
			case *agentsv1.Workspace:
				o.Spec.Budget = b
			}
			Expect(k8sClient.Patch(ctx, obj, patch)).To(Succeed())
		}
		a := &agentsv1.Agent{}
		a.Namespace, a.Name = ws, agent
		w := &agentsv1.Workspace{}
		w.Name = ws
		// Tokens per day: the day's usage (80 tokens) is over a budget of 50.
		setBudget(a, &agentsv1.ModelBudget{TokensPerDay: 50})
		Eventually(func() string { _, b := proxyCall(cred, false); return b }).Should(
			ContainSubstring("agent budget exceeded: 50 tokens per day"))
		status, body := proxyCall(cred, false)
		Expect(status).To(Equal(429))
		Expect(body).To(ContainSubstring(`"rate_limit_error"`))
		setBudget(a, nil)
		Eventually(func() int { s, _ := proxyCall(cred, false); return s }).Should(Equal(200))
		// The workspace's budget holds for its agents together.
		setBudget(w, &agentsv1.ModelBudget{TokensPerDay: 60})
		Eventually(func() string { _, b := proxyCall(cred, false); return b }).Should(
			ContainSubstring("workspace budget exceeded: 60 tokens per day"))
		setBudget(w, nil)
		Eventually(func() int { s, _ := proxyCall(cred, false); return s }).Should(Equal(200))
		// Requests per minute: of three quick requests at most one window's worth passes.
		setBudget(a, &agentsv1.ModelBudget{RequestsPerMinute: 1})
		Eventually(func() int {
			var s int
			for range 3 {
				s, _ = proxyCall(cred, false)
			}
			return s
		}).Should(Equal(429))
		setBudget(a, nil)
		// Spend per day, by the suite's price table: the day's cost is over a millionth of a
		// dollar; a model the table has no price for is refused while the budget applies.
		setBudget(a, &agentsv1.ModelBudget{CostMicrosPerDay: 1})
		Eventually(func() string { _, b := proxyCall(cred, false); return b }).Should(
			ContainSubstring("agent budget exceeded: 0.000001 USD per day"))
		setBudget(a, &agentsv1.ModelBudget{CostMicrosPerDay: 1_000_000_000})
		Eventually(func() int { s, _ := proxyCall(cred, false); return s }).Should(Equal(200))
		req, err := http.NewRequest("POST", baseURL+"/llm/anthropic/v1/messages",
			strings.NewReader(`{"model":"claude-opus-9","max_tokens":8,"messages":[{"role":"user","content":"ping"}]}`))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("x-api-key", cred)
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(403), string(b))
		Expect(string(b)).To(ContainSubstring(`model \"claude-opus-9\" has no price`))
		setBudget(a, nil)
	})

	It("refuses the credential at once when the secret is detached", func() {
		r := call("DELETE", "/v0/agents/"+agent+"/secrets/"+sid, tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		status, _ := proxyCall(cred, false)
		Expect(status).To(Equal(401))
		// The config loses the proxy's entry; the key never moved to the environment.
		Eventually(func() map[string]any { return proxyEntry(tok, agent, "anthropic") }).Should(BeNil())
		Expect(gatewayEnv(tok, agent, "ANTHROPIC_API_KEY")).To(BeEmpty())
		r = call("POST", "/v0/agents/"+agent+"/secrets", tok, map[string]any{"secretIds": []string{sid}})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(credential()).To(Equal(cred))
		Eventually(func() int { s, _ := proxyCall(cred, false); return s }).Should(Equal(200))
	})

	It("rotates the credential with the gateway token", func() {
		r := call("POST", "/v0/agents/"+agent+"/gateway-token/rotate", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Eventually(func() int { s, _ := proxyCall(cred, false); return s }).Should(Equal(401))
		var fresh string
		Eventually(func() string { fresh = credential(); return fresh }).ShouldNot(Equal(cred))
		Eventually(func() int { s, _ := proxyCall(fresh, false); return s }).Should(Equal(200))
		cred = fresh
	})

	It("refuses the credential once the agent is deleted", func() {
		r := call("DELETE", "/v0/agents/"+agent, tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Eventually(func() int { s, _ := proxyCall(cred, false); return s }).Should(Equal(401))
	})
})
