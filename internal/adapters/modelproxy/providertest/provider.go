// Package providertest is a fake model provider on loopback for tests of the model proxy from
// outside its package (the REST suite, end-to-end tests with the real engine): it answers the
// Anthropic Messages API (streamed or not) and OpenAI's chat completions and embeddings, with
// usage, and records the key and path of every request.
package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Usage the fake reports for every answer.
const (
	InputTokens  = 25
	OutputTokens = 15
	// Reply is the text of every answer.
	Reply = "pong from the fake provider"
	// ToolPrompt in a streamed chat completion's last message makes the answer call the tool
	// ToolName with ToolArguments before its text.
	ToolPrompt    = "use a tool"
	ToolName      = "read_notes"
	ToolArguments = `{"file":"notes.md"}`
)

// Request is what the fake received.
type Request struct {
	Path string
	// Key is the credential as the provider reads it (x-api-key, else the bearer token).
	Key    string
	Stream bool
}

// Provider is a running fake provider.
type Provider struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
	gate chan struct{}
}

// Hold makes the next streams stop after their first event until release is called (a test
// of unbuffered relays reads that event first).
func (p *Provider) Hold() (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.gate = nil
			p.mu.Unlock()
			close(gate)
		})
	}
}

// New starts a fake provider; Close stops it.
func New() *Provider {
	p := &Provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// Requests returns what the fake received so far.
func (p *Provider) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.reqs...)
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Content any `json:"content"`
		} `json:"messages"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &body)
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	p.mu.Lock()
	p.reqs = append(p.reqs, Request{Path: r.URL.Path, Key: key, Stream: body.Stream})
	gate := p.gate
	p.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/messages") && body.Stream:
		anthropicStream(w, body.Model, gate)
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		writeJSON(w, map[string]any{
			"id": "msg_fake", "type": "message", "role": "assistant", "model": body.Model,
			"content":     []any{map[string]any{"type": "text", "text": Reply}},
			"stop_reason": "end_turn", "usage": map[string]any{"input_tokens": InputTokens, "output_tokens": OutputTokens},
		})
	case strings.HasSuffix(r.URL.Path, "/chat/completions") && body.Stream:
		tool := false
		if n := len(body.Messages); n > 0 {
			last, _ := body.Messages[n-1].Content.(string)
			tool = strings.Contains(last, ToolPrompt)
		}
		openaiStream(w, body.Model, tool, gate)
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		writeJSON(w, map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "model": body.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": Reply}}},
			"usage":   map[string]any{"prompt_tokens": InputTokens, "completion_tokens": OutputTokens, "total_tokens": InputTokens + OutputTokens},
		})
	case strings.HasSuffix(r.URL.Path, "/embeddings"):
		writeJSON(w, map[string]any{
			"object": "list", "model": body.Model,
			"data":  []any{map[string]any{"object": "embedding", "index": 0, "embedding": []float64{0.1, 0.2, 0.3}}},
			"usage": map[string]any{"prompt_tokens": InputTokens, "total_tokens": InputTokens},
		})
	default:
		http.Error(w, `{"error":{"message":"not found","type":"not_found_error"}}`, http.StatusNotFound)
	}
}

// anthropicStream writes a Messages API stream: message_start (input usage), one text delta,
// message_delta (output usage), message_stop; each event flushed on its own. A non-nil gate
// holds the stream after its first event until it closes.
func anthropicStream(w http.ResponseWriter, model string, gate <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	events := []struct {
		name string
		data map[string]any
	}{
		{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
			"usage": map[string]any{"input_tokens": InputTokens, "output_tokens": 1}}}},
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}},
		{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": Reply}}},
		{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": OutputTokens}}},
		{"message_stop", map[string]any{"type": "message_stop"}},
	}
	for i, e := range events {
		b, _ := json.Marshal(e.data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.name, b)
		http.NewResponseController(w).Flush()
		if i == 0 && gate != nil {
			<-gate
		}
	}
}

// openaiStream writes a chat completions stream: the role, with tool a tool call (its name,
// then its arguments in two fragments), the text in word-sized deltas, the finish, a usage
// chunk and [DONE]; each chunk flushed on its own. A non-nil gate holds the stream after its
// first chunk until it closes.
func openaiStream(w http.ResponseWriter, model string, tool bool, gate <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	chunks := []map[string]any{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	if tool {
		half := len(ToolArguments) / 2
		call := func(fn map[string]any) map[string]any {
			c := map[string]any{"index": 0, "function": fn}
			if fn["name"] != nil {
				c["id"], c["type"] = "call_fake", "function"
			}
			return chunk(map[string]any{"tool_calls": []any{c}}, nil)
		}
		chunks = append(chunks, call(map[string]any{"name": ToolName, "arguments": ""}),
			call(map[string]any{"arguments": ToolArguments[:half]}), call(map[string]any{"arguments": ToolArguments[half:]}))
	}
	for _, word := range strings.SplitAfter(Reply, " ") {
		chunks = append(chunks, chunk(map[string]any{"content": word}, nil))
	}
	chunks = append(chunks, chunk(map[string]any{}, "stop"), map[string]any{"id": "chatcmpl-fake",
		"object": "chat.completion.chunk", "model": model, "choices": []any{},
		"usage": map[string]any{"prompt_tokens": InputTokens, "completion_tokens": OutputTokens, "total_tokens": InputTokens + OutputTokens}})
	for i, c := range chunks {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		http.NewResponseController(w).Flush()
		if i == 0 && gate != nil {
			<-gate
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	http.NewResponseController(w).Flush()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
