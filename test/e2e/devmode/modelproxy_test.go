package devmode

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	apclient "github.com/agentplane/agentplane/pkg/client"
	"github.com/agentplane/agentplane/test/e2e"
)

// checkModelProxy drives the real engine's provider path through the model proxy: an
// attached anthropic key never reaches the gateway (environment, home), another secret does;
// a chat turn through the gateway's OpenAI-compatible endpoint makes the engine call
// anthropic at the proxy, which forwards it, streamed, to the fake provider with the real key;
// the proxy's usage reaches the Agent's status. p runs with --model-proxy-upstream
// anthropic=llm.URL.
func checkModelProxy(t *testing.T, p *e2e.Platform, llm *providertest.Provider, id, endpoint string) {
	base := "/v0/agents/" + id
	key := "sk-ant-e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	other := "ghp-e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ant := e2e.Must(t, p.Call("POST", "/v0/secrets", map[string]string{"name": "ANTHROPIC_API_KEY", "value": key, "provider": "anthropic"}), 201, "create secret").Obj("secret")
	gh := e2e.Must(t, p.Call("POST", "/v0/secrets", map[string]string{"name": "GITHUB_TOKEN", "value": other, "provider": "github"}), 201, "create secret").Obj("secret")
	e2e.Must(t, p.Call("POST", base+"/secrets", map[string]any{"secretIds": []string{ant["id"].(string), gh["id"].(string)}}), 200, "attach")

	e2e.Eventually(t, "the gateway to restart with its secrets", func() bool {
		v, _ := gatewayEnvValue(p, base, "GITHUB_TOKEN")
		return v == other
	})
	if v, _ := gatewayEnvValue(p, base, "ANTHROPIC_API_KEY"); v != "" {
		t.Fatal("the provider key is in the gateway's environment")
	}
	r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{
		// ROT13: console output would hide the key itself. The agent's processes (its own PID
		// namespace) and its home: nothing holds the key.
		"command": `{ cat /proc/[0-9]*/environ | tr '\0' '\n'; env; } | tr A-Za-z N-ZA-Mn-za-m; grep -rlF '` + key + `' ../../.. ; echo searched`,
	}), 200, "search the agent for the key")
	if out := r.Str("stdout"); strings.Contains(out, e2e.Rot13(key)) || strings.Contains(out, key) || !strings.Contains(out, "searched") || strings.Contains(out, "../") {
		t.Fatalf("the provider key is readable inside the agent:\n%s", out)
	}

	// The user's config: the engine's chat-completions endpoint on, anthropic as the model.
	// The platform renders the proxy's entry for anthropic into the file.
	cfg := e2e.Must(t, p.Call("GET", base+"/config", nil), 200, "read config").Obj("config")
	gw, _ := cfg["gateway"].(map[string]any)
	if gw == nil {
		gw = map[string]any{}
		cfg["gateway"] = gw
	}
	gw["http"] = map[string]any{"endpoints": map[string]any{"chatCompletions": map[string]any{"enabled": true}}}
	agents, _ := cfg["agents"].(map[string]any)
	defaults, _ := agents["defaults"].(map[string]any)
	defaults["model"] = map[string]any{"primary": "anthropic/claude-sonnet-4-6"}
	e2e.Must(t, p.Call("PUT", base+"/config", map[string]any{"config": cfg}), 200, "write config")
	file := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "cat ../openclaw.json"}), 200, "read the file").Str("stdout")
	if !strings.Contains(file, agentsv1.ModelCredentialPrefix) || !strings.Contains(file, "/llm/anthropic") || strings.Contains(file, key) {
		t.Fatalf("the engine config does not point anthropic at the proxy:\n%s", file)
	}

	token := e2e.Must(t, p.Call("GET", base+"/gateway-token", nil), 200, "read token").Str("token")
	before := len(llm.Requests())
	var events []string
	e2e.Eventually(t, "a streamed chat turn through the engine and the proxy", func() bool {
		events = chatTurn(t, endpoint, token)
		return strings.Contains(strings.Join(events, "\n"), providertest.Reply)
	})
	var turns int
	for _, q := range llm.Requests()[before:] {
		if q.Path != "/v1/messages" {
			continue
		}
		turns++
		if q.Key != key || !q.Stream {
			t.Fatalf("the provider got key %q (stream %v), want the real key, streamed", q.Key, q.Stream)
		}
	}
	if turns == 0 {
		t.Fatalf("the fake provider saw no Messages request: %+v", llm.Requests())
	}
	t.Logf("a chat turn through the engine reached the provider with the real key, streamed (%d SSE chunks)", len(events))
	if strings.Contains(p.Log.String(), key) {
		t.Fatal("the provider key appears in the platform's log")
	}
	checkPlatformChat(t, p, id)
	k8s := p.KubeClient()
	e2e.Eventually(t, "the proxy's usage in the agent's status", func() bool {
		a := &agentsv1.Agent{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "dev", Name: id}, a); err != nil {
			return false
		}
		return a.Status.Usage != nil && a.Status.Usage.Requests >= int64(turns) && a.Status.Usage.OutputTokens >= providertest.OutputTokens
	})
}

// chatTurn posts one streamed chat completion to the gateway and returns its SSE data lines
// (none when the gateway refuses).
func chatTurn(t *testing.T, endpoint, token string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2e.EventBound)
	defer cancel()
	body := `{"model":"openclaw","stream":true,"messages":[{"role":"user","content":"ping"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", endpoint+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			lines = append(lines, l)
		}
	}
	return lines
}

// checkPlatformChat talks to the agent through the platform (POST /v0/agents/{id}/chat, the
// Go client): the facade reaches the real gateway's chat endpoint with the agent's token, the
// engine calls the fake provider through the proxy, and the turn streams the reply with the
// proxy's count of it; a second turn continues the conversation the platform kept.
func checkPlatformChat(t *testing.T, p *e2e.Platform, id string) {
	c, err := apclient.New(p.URL, p.Token)
	if err != nil {
		t.Fatal(err)
	}
	conversation := ""
	for turn := 1; turn <= 2; turn++ {
		ctx, cancel := context.WithTimeout(context.Background(), e2e.EventBound)
		var text strings.Builder
		var usage *apclient.TurnUsage
		var failed []string
		err := c.Chat(ctx, id, conversation, "ping", func(ev apclient.ChatEvent) {
			switch ev.Type {
			case "conversation":
				conversation = ev.Conversation.Id
			case "text":
				text.WriteString(ev.Text)
			case "usage":
				usage = ev.Usage
			case "error", "refused":
				failed = append(failed, ev.Type+": "+ev.Message)
			}
		})
		cancel()
		if err != nil || len(failed) > 0 || !strings.Contains(text.String(), providertest.Reply) || usage == nil || !usage.Metered || usage.Requests < 1 {
			t.Fatalf("turn %d through the platform: %v %v, text %q, usage %+v", turn, err, failed, text.String(), usage)
		}
	}
	got, err := apclient.Decoded[struct {
		Conversation apclient.Conversation `json:"conversation"`
	}](c.GetConversationWithResponse(context.Background(), id, conversation, &apclient.GetConversationParams{}))
	if err != nil || got.Conversation.Turns != 2 || len(got.Conversation.Messages) != 4 {
		t.Fatalf("the kept conversation: %v %+v", err, got.Conversation)
	}
	t.Logf("two chat turns through the platform reached the real gateway and the provider (conversation %s)", conversation)
}
