package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apclient "github.com/agentplane/agentplane/pkg/client"
)

// chatStub serves POST /v0/agents/agt-1/chat as the facade streams a turn (the facade's own
// test runs the real route): it checks the token and the body the command sends, and streams
// the events of end after a wake, a tool call and a reply.
func chatStub(t *testing.T, end string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Message, ConversationID string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != "/v0/agents/agt-1/chat" || req.Message != "hi" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"Agent not found"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: waking\ndata: {}\n\nevent: awake\ndata: {}\n\n: keep-alive\n\n"+
			"event: conversation\ndata: {\"conversation\":{\"id\":\"cnv-aaaaaaaaaaaaaaaa\",\"title\":\"hi\"}}\n\n"+
			"event: tool\ndata: {\"tool\":{\"id\":\"c1\",\"name\":\"read_notes\",\"arguments\":\"{}\"}}\n\n"+
			"event: tool_result\ndata: {\"tool\":{\"id\":\"c1\",\"result\":\"notes\"}}\n\n"+
			"event: text\ndata: {\"text\":\"hello \"}\n\nevent: text\ndata: {\"text\":\"there\"}\n\n"+
			"event: usage\ndata: {\"usage\":{\"requests\":1,\"inputTokens\":25,\"outputTokens\":15,\"metered\":true,\"costMicros\":170,\"currency\":\"USD\"}}\n\n"+end)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestChatCommand(t *testing.T) {
	t.Setenv("AGENTPLANE_URL", "")
	t.Setenv("AGENTPLANE_TOKEN", "")
	srv := chatStub(t, "event: done\ndata: {\"conversation\":{\"id\":\"cnv-aaaaaaaaaaaaaaaa\",\"turns\":1}}\n\n")
	r := runCLI(t, "chat", "agt-1", "hi", "--url", srv.URL, "--token", "tok", "--state-dir", t.TempDir())
	if r.code != 0 || r.stdout != "\n[tool read_notes {}]\n[result notes]\nhello there\n" ||
		!strings.Contains(r.stderr, "waking") || !strings.Contains(r.stderr, "1 model requests, 25 input and 15 output tokens, 0.00017 USD; conversation cnv-aaaaaaaaaaaaaaaa") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A budget's refusal: its reason on stderr, exit 1.
	srv = chatStub(t, "event: refused\ndata: {\"message\":\"agentplane: agent budget exceeded: 10 tokens per day\"}\n\nevent: done\ndata: {}\n\n")
	r = runCLI(t, "chat", "agt-1", "hi", "--url", srv.URL, "--token", "tok", "--state-dir", t.TempDir())
	if r.code != 1 || strings.TrimSpace(lastLine(r.stderr)) != "error: refused: agentplane: agent budget exceeded: 10 tokens per day" {
		t.Fatalf("refused: exit %d, stderr %q", r.code, r.stderr)
	}
	fails(t, 1, "agentplane: 404 Agent not found", "chat", "agt-2", "hi", "--url", srv.URL, "--token", "tok", "--state-dir", t.TempDir())
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestTurnCost(t *testing.T) {
	usd, n := "USD", func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		u    apclient.TurnUsage
		want string
	}{
		{apclient.TurnUsage{}, ""},
		{apclient.TurnUsage{Currency: &usd, CostMicros: n(170)}, ", 0.00017 USD"},
		{apclient.TurnUsage{Currency: &usd, CostMicros: n(1_500_000)}, ", 1.50 USD"},
		{apclient.TurnUsage{Currency: &usd, UnpricedRequests: n(2)}, ", 0.00 USD and 2 unpriced"},
		{apclient.TurnUsage{Currency: &usd, CostMicros: n(12_345_678)}, ", 12.345678 USD"},
	} {
		if got := turnCost(&tc.u); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.u, got, tc.want)
		}
	}
}
