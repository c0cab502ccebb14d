package openclaw

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// chatGateway answers POST /v1/chat/completions with status and body, after checking what a
// turn sends.
func chatGateway(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer gw-token" ||
			!strings.Contains(string(b), `"user":"agentplane-chat:c1"`) || !strings.Contains(string(b), `"stream":true`) ||
			!strings.Contains(string(b), `"content":"hi"`) {
			t.Errorf("the turn sent %s %s %q", r.URL.Path, r.Header.Get("Authorization"), b)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func chat(t *testing.T, url string) ([]engine.ChatEvent, error) {
	t.Helper()
	var evs []engine.ChatEvent
	err := New().Chat(context.Background(), engine.ChatTurn{Endpoint: url + "/", Token: "gw-token", Session: "agentplane-chat:c1", Message: "hi"},
		func(ev engine.ChatEvent) error { evs = append(evs, ev); return nil })
	return evs, err
}

func TestChatReadsTextAndToolCallsAsTheyStream(t *testing.T) {
	stream := strings.Join([]string{
		`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`data: {"choices":[{"index":0,"delta":{"content":"Let me look. "}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
		`data: {"choices":[{"index":0,"delta":{"role":"tool","tool_call_id":"call_1","content":"one"}}]}`,
		`: a comment`,
		`data: {"choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"stop"}]}`,
		`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		`data: [DONE]`, ``,
	}, "\n\n")
	evs, err := chat(t, chatGateway(t, 200, stream))
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.ChatEvent{
		{Kind: engine.ChatText, Text: "Let me look. "},
		{Kind: engine.ChatToolCall, ToolID: "call_1", ToolName: "read", Arguments: `{"a":1}`},
		{Kind: engine.ChatToolResult, ToolID: "call_1", Text: "one"},
		{Kind: engine.ChatText, Text: "Done."},
	}
	if len(evs) != len(want) {
		t.Fatalf("events %+v, want %+v", evs, want)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, evs[i], want[i])
		}
	}
}

func TestChatFailuresSayWhat(t *testing.T) {
	if _, err := chat(t, chatGateway(t, 404, "Not Found")); !errors.Is(err, engine.ErrChatDisabled) {
		t.Errorf("a gateway without the endpoint: %v", err)
	}
	if _, err := chat(t, chatGateway(t, 401, `{"error":{"message":"Unauthorized","type":"unauthorized"}}`)); !errors.Is(err, engine.ErrChatRefused) ||
		!strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("a refused turn: %v", err)
	}
	// A run that fails mid-stream: the text before it, then the gateway's message.
	evs, err := chat(t, chatGateway(t, 200, `data: {"choices":[{"index":0,"delta":{"content":"par"}}]}`+"\n\n"+
		`data: {"error":{"message":"429 agentplane: agent budget exceeded","type":"api_error"}}`+"\n\ndata: [DONE]\n\n"))
	if !errors.Is(err, engine.ErrChatRefused) || !strings.Contains(err.Error(), "budget exceeded") || len(evs) != 1 || evs[0].Text != "par" {
		t.Errorf("a failed run: %v, events %+v", err, evs)
	}
}
