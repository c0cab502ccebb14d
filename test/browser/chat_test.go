package browser

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/providertest"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// TestChatInChromium drives the agent page's chat pane (chat.test.mjs) against a platform
// whose model proxy forwards openai to a fake provider: a turn with a tool call, reopening a
// conversation, waking a sleeping agent, a budget's refusal, each turn's cost by a price
// table and the fleet's spend. With
// AGENTPLANE_UPDATE_SCREENSHOTS=1 the pane's screenshot is copied to
// docs/images/console-chat.png (the README shows it).
func TestChatInChromium(t *testing.T) {
	llm := providertest.New()
	t.Cleanup(llm.Close)
	prices := filepath.Join(t.TempDir(), "prices.yaml")
	table := "currency: USD\nmodels:\n- provider: openai\n  model: gpt-test\n  input: \"2\"\n  output: \"8\"\n"
	if err := os.WriteFile(prices, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSuite(t, agentplanetest.WithModelProviders(map[string]string{"openai": llm.URL}), agentplanetest.WithModelPrices(prices))
	const ws = "console-chat"
	token := s.token(t, ws)
	talker := createAgent(t, s.p.URL(), token, "chat-demo")
	spender := createAgent(t, s.p.URL(), token, "budget-demo")
	a := &agentsv1.Agent{}
	if err := s.p.Client().Get(s.ctx, client.ObjectKey{Namespace: ws, Name: spender}, a); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(a.DeepCopy())
	a.Spec.Budget = &agentsv1.ModelBudget{TokensPerDay: 1}
	if err := s.p.Client().Patch(s.ctx, a, patch); err != nil {
		t.Fatal(err)
	}
	s.run(t, "chat.test.mjs", 7, "AGENTPLANE_TOKEN="+token, "CHAT_AGENT="+talker, "BUDGET_AGENT="+spender)
	s.screenshot(t, "chat.png", "console-chat.png")
}

// createAgent creates an agent through the REST facade (which answers once it runs) and
// returns its id.
func createAgent(t *testing.T, url, token, name string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name})
	req, _ := http.NewRequest("POST", url+"/v0/agents", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Agent struct{ ID string } `json:"agent"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &got) != nil || got.Agent.ID == "" {
		t.Fatalf("create agent %s: %d %s", name, resp.StatusCode, raw)
	}
	return got.Agent.ID
}
