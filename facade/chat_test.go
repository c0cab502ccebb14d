package facade_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw/program"
	"github.com/agentplane/agentplane/internal/ops"
)

// chatEvent is one server-sent event of a chat turn.
type chatEvent struct {
	Type string
	Data map[string]any
}

// chatTurn posts one message and reads the turn's events until the stream ends.
func chatTurn(tok, agent, conversation, message string) []chatEvent {
	GinkgoHelper()
	body, _ := json.Marshal(ops.ChatRequest{Message: message, ConversationID: conversation})
	req, err := http.NewRequest("POST", baseURL+"/v0/agents/"+agent+"/chat", strings.NewReader(string(body)))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(200))
	Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	var events []chatEvent
	sc := bufio.NewScanner(resp.Body)
	var ev chatEvent
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, "event: "):
			ev = chatEvent{Type: strings.TrimPrefix(l, "event: ")}
		case strings.HasPrefix(l, "data: "):
			Expect(json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &ev.Data)).To(Succeed())
			events = append(events, ev)
		}
	}
	return events
}

func eventTypes(evs []chatEvent) []string {
	var out []string
	for _, e := range evs {
		if len(out) == 0 || out[len(out)-1] != e.Type || e.Type != "text" {
			out = append(out, e.Type)
		}
	}
	return out
}

func replyText(evs []chatEvent) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == "text" {
			b.WriteString(e.Data["text"].(string))
		}
	}
	return b.String()
}

func eventOf(evs []chatEvent, typ string) map[string]any {
	for _, e := range evs {
		if e.Type == typ {
			return e.Data
		}
	}
	return nil
}

// Talking to an agent: a turn goes to the engine double's chat endpoint with the agent's
// gateway token, the double calls the fake provider through the model proxy (openai), and the
// turn streams back its text, its tool call and result, the proxy's count of the turn; the
// conversation is kept and continues; a sleeping agent is woken and says so; a budget's
// refusal says why.
var _ = Describe("Chat", Ordered, func() {
	const (
		ws  = "chat-a"
		key = "sk-openai-chat-test-never-in-the-agent"
	)
	var tok, agent string

	BeforeAll(func() {
		tok = snapshotWorkspace(ws)
		r := call("POST", "/v0/secrets", tok, map[string]string{"name": "OPENAI_API_KEY", "value": key, "provider": "openai"})
		Expect(r.Status).To(Equal(201), r.Raw)
		agent = newAgentIn(tok, "Talker")
		r = call("POST", "/v0/agents/"+agent+"/secrets", tok, map[string]any{"secretIds": []string{secretID(r)}})
		Expect(r.Status).To(Equal(200), r.Raw)
		Eventually(func() map[string]any { return proxyEntry(tok, agent, "openai") }).ShouldNot(BeNil())
	})

	It("refuses a bad message before it streams and says when the gateway's chat is off", func() {
		r := call("POST", "/v0/agents/"+agent+"/chat", tok, map[string]any{"message": "  "})
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(Equal(ops.MsgInvalidMessage))
		r = call("POST", "/v0/agents/"+agent+"/chat", tok, map[string]any{"message": "hi", "conversationId": "../x"})
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(Equal(ops.MsgInvalidConversationID))
		r = call("POST", "/v0/agents/agt-nobody/chat", tok, map[string]any{"message": "hi"})
		Expect(r.Status).To(Equal(404), r.Raw)
		// A token without agents:exec may not talk to the agent.
		read := token(ws, "ann", "", "agents:read")
		r = call("POST", "/v0/agents/"+agent+"/chat", read, map[string]any{"message": "hi"})
		Expect(r.Status).To(Equal(403), r.Raw)
		// The gateway's endpoint is off until the config enables it.
		evs := chatTurn(tok, agent, "", "hello")
		Expect(eventOf(evs, "error")).To(HaveKeyWithValue("message", ops.MsgChatDisabled))
	})

	It("streams a turn with a tool call and its result, and the proxy's count of it", func() {
		_, cfg := engineConfig(tok, agent)
		cfg["gateway"].(map[string]any)["http"] = map[string]any{"endpoints": map[string]any{"chatCompletions": map[string]any{"enabled": true}}}
		agents, _ := cfg["agents"].(map[string]any)
		if agents == nil {
			agents = map[string]any{}
			cfg["agents"] = agents
		}
		agents["defaults"] = map[string]any{"model": map[string]any{"primary": "openai/gpt-test"}}
		r := call("PUT", "/v0/agents/"+agent+"/config", tok, map[string]any{"config": cfg})
		Expect(r.Status).To(Equal(200), r.Raw)

		before := len(llm.Requests())
		evs := chatTurn(tok, agent, "", "please "+providertest.ToolPrompt)
		Expect(eventTypes(evs)).To(Equal([]string{"conversation", "tool", "tool_result", "text", "usage", "done"}), "%v", evs)
		tool := eventOf(evs, "tool")["tool"].(map[string]any)
		Expect(tool).To(HaveKeyWithValue("name", providertest.ToolName))
		Expect(tool).To(HaveKeyWithValue("arguments", providertest.ToolArguments))
		Expect(eventOf(evs, "tool_result")["tool"]).To(HaveKeyWithValue("result", program.ToolResultPrefix+providertest.ToolName))
		Expect(replyText(evs)).To(Equal(providertest.Reply))
		Expect(eventOf(evs, "usage")["usage"]).To(Equal(map[string]any{
			"requests": 1.0, "inputTokens": float64(providertest.InputTokens), "outputTokens": float64(providertest.OutputTokens), "metered": true,
			// The suite's price table has no price for gpt-test (suitePrices).
			"currency": "USD", "unpricedRequests": 1.0,
		}))
		reqs := llm.Requests()[before:]
		Expect(reqs).To(HaveLen(1))
		Expect(reqs[0].Key).To(Equal(key))
		Expect(reqs[0].Stream).To(BeTrue())

		// The conversation is kept: listed, reopened, continued.
		conv := eventOf(evs, "conversation")["conversation"].(map[string]any)
		id := conv["id"].(string)
		Expect(conv["title"]).To(Equal("please " + providertest.ToolPrompt))
		evs = chatTurn(tok, agent, id, "and again")
		Expect(replyText(evs)).To(Equal(providertest.Reply))
		Expect(eventOf(evs, "done")["conversation"]).To(HaveKeyWithValue("turns", 2.0))
		r = call("GET", "/v0/agents/"+agent+"/chat/conversations", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		list := r.Body["conversations"].([]any)
		Expect(list).NotTo(BeEmpty())
		Expect(list[0]).To(HaveKeyWithValue("id", id))
		r = call("GET", "/v0/agents/"+agent+"/chat/conversations/"+id, tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		msgs := r.Body["conversation"].(map[string]any)["messages"].([]any)
		Expect(msgs).To(HaveLen(4))
		Expect(msgs[1]).To(HaveKeyWithValue("text", providertest.Reply))
		Expect(msgs[1].(map[string]any)["tools"]).To(ConsistOf(HaveKeyWithValue("result", program.ToolResultPrefix+providertest.ToolName)))
		Expect(msgs[2]).To(HaveKeyWithValue("text", "and again"))
		r = call("GET", "/v0/agents/"+agent+"/chat/conversations/cnv-aaaaaaaaaaaaaaaa", tok, nil)
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(r.v0Error()).To(Equal(ops.MsgConversationNotFound))
		// The gateway token never reached the caller.
		gw := call("GET", "/v0/agents/"+agent+"/gateway-token", tok, nil).Body["token"].(string)
		for _, e := range evs {
			b, _ := json.Marshal(e.Data)
			Expect(string(b)).NotTo(ContainSubstring(gw))
		}
	})

	It("wakes a sleeping agent and says so", func() {
		r := call("POST", "/v0/agents/"+agent+"/suspend", tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		evs := chatTurn(tok, agent, "", "are you there")
		Expect(eventTypes(evs)).To(Equal([]string{"waking", "awake", "conversation", "text", "usage", "done"}), "%v", evs)
		Expect(replyText(evs)).To(Equal(providertest.Reply))
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ws, Name: agent}, a)).To(Succeed())
		Expect(a.Status.Phase).To(Equal(agentsv1.AgentRunning))
	})

	It("says why when the budget refuses the turn", func() {
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ws, Name: agent}, a)).To(Succeed())
		patch := client.MergeFrom(a.DeepCopy())
		a.Spec.Budget = &agentsv1.ModelBudget{TokensPerDay: 10}
		Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		DeferCleanup(func() {
			Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ws, Name: agent}, a)).To(Succeed())
			patch := client.MergeFrom(a.DeepCopy())
			a.Spec.Budget = nil
			Expect(k8sClient.Patch(ctx, a, patch)).To(Succeed())
		})
		var evs []chatEvent
		// The proxy reads the budget from its cache: the turn after it has seen it is refused.
		Eventually(func() map[string]any {
			evs = chatTurn(tok, agent, "", "spend more")
			return eventOf(evs, "refused")
		}).Should(HaveKeyWithValue("message", ContainSubstring("agent budget exceeded: 10 tokens per day")))
		Expect(replyText(evs)).To(BeEmpty())
		Expect(eventOf(evs, "usage")["usage"]).To(HaveKeyWithValue("requests", 0.0))
		Expect(eventOf(evs, "done")).NotTo(BeNil())
	})
})
