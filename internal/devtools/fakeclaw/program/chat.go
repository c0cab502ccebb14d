package program

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// The fake gateway's OpenAI-compatible chat endpoint (POST /v1/chat/completions), served like
// the real one only when gateway.http.endpoints.chatCompletions.enabled: streamed turns only.
// A turn calls the model provider of agents.defaults.model.primary ("<provider>/<model>") at
// the models.providers entry's baseUrl with its apiKey (the model proxy, when the platform
// rendered it), in the OpenAI chat completions format, and relays the provider's stream. A
// tool call the provider streams is "run" by the fake (its result is a chunk whose delta has
// role "tool", a shape the real gateway does not send over HTTP) before the provider's text
// goes on. The conversation of an OpenAI `user` is kept in memory as the session the real
// gateway derives from it. A provider's refusal ends the stream with an error object and
// [DONE], as the real gateway ends a failed run.

// ToolResultPrefix starts the text the fake gateway reports as a tool's result.
const ToolResultPrefix = "fakeclaw ran "

// chatSessions are the conversations by OpenAI user.
var chatSessions = struct {
	sync.Mutex
	m map[string][]map[string]any
}{m: map[string][]map[string]any{}}

type chatRequest struct {
	Model    string           `json:"model"`
	Stream   bool             `json:"stream"`
	User     string           `json:"user"`
	Messages []map[string]any `json:"messages"`
}

func (g *gateway) chat(w http.ResponseWriter, r *http.Request) {
	if !g.authorized(r) {
		unauthorized(w)
		return
	}
	cfg, _, err := loadConfig(g.cfgPath)
	if on, _ := get(cfg, "gateway", "http", "endpoints", "chatCompletions", "enabled").(bool); err != nil || !on {
		notFound(w, r)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 20<<20)).Decode(&req); err != nil || !req.Stream || len(req.Messages) == 0 {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "fakeclaw: a streamed chat with messages", "type": "invalid_request_error"}})
		return
	}
	history := append(sessionOf(req.User), req.Messages[len(req.Messages)-1])
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	reply, err := relayProvider(w, r, cfg, history)
	if err != nil {
		writeChunk(w, map[string]any{"error": map[string]any{"message": err.Error(), "type": "api_error"}})
	} else if req.User != "" {
		chatSessions.Lock()
		chatSessions.m[req.User] = append(history, map[string]any{"role": "assistant", "content": reply})
		chatSessions.Unlock()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	http.NewResponseController(w).Flush()
}

func sessionOf(user string) []map[string]any {
	chatSessions.Lock()
	defer chatSessions.Unlock()
	return append([]map[string]any(nil), chatSessions.m[user]...)
}

// relayProvider sends the turn to the configured provider and relays its stream to w; it
// returns the reply's text.
func relayProvider(w http.ResponseWriter, r *http.Request, cfg map[string]any, history []map[string]any) (string, error) {
	primary, _ := get(cfg, "agents", "defaults", "model", "primary").(string)
	name, model, _ := strings.Cut(primary, "/")
	entry, _ := get(cfg, "models", "providers", name).(map[string]any)
	base, _ := entry["baseUrl"].(string)
	key := resolveSecret(entry["apiKey"])
	if base == "" || key == "" {
		return "", fmt.Errorf("No API key found for provider %q", name)
	}
	body, _ := json.Marshal(map[string]any{"model": model, "stream": true, "messages": history,
		"stream_options": map[string]any{"include_usage": true}})
	up, _ := http.NewRequestWithContext(r.Context(), "POST", strings.TrimSuffix(base, "/")+"/chat/completions", bytes.NewReader(body))
	up.Header.Set("Authorization", "Bearer "+key)
	up.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		return "", fmt.Errorf("provider %s unreachable: %v", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = json.Unmarshal(b, &e)
		return "", fmt.Errorf("%s (HTTP %d)", e.Error.Message, resp.StatusCode)
	}
	return relayStream(w, resp.Body), nil
}

// relayStream copies the provider's chunks to w, reporting each tool call's result once the
// call is complete (before the next text, or at the end), and returns the text.
func relayStream(w http.ResponseWriter, body io.Reader) string {
	var text strings.Builder
	calls := map[float64]*struct{ id, name string }{}
	var pending []float64
	flushTools := func() {
		for _, i := range pending {
			c := calls[i]
			writeChunk(w, map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0,
				"delta": map[string]any{"role": "tool", "tool_call_id": c.id, "content": ToolResultPrefix + c.name}}}})
		}
		pending = nil
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    float64 `json:"index"`
						ID       string  `json:"id"`
						Function struct {
							Name string `json:"name"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &chunk) != nil {
			continue
		}
		for _, c := range chunk.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if calls[tc.Index] == nil {
					calls[tc.Index] = &struct{ id, name string }{}
					pending = append(pending, tc.Index)
				}
				if tc.ID != "" {
					calls[tc.Index].id = tc.ID
				}
				calls[tc.Index].name += tc.Function.Name
			}
			if c.Delta.Content != "" {
				flushTools()
				text.WriteString(c.Delta.Content)
			}
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		http.NewResponseController(w).Flush()
	}
	flushTools()
	return text.String()
}

func writeChunk(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	http.NewResponseController(w).Flush()
}
