package openclaw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Chat turns go to the gateway's OpenAI-compatible endpoint (POST /v1/chat/completions,
// gateway.http.endpoints.chatCompletions.enabled; verified on 2026.9.6): model "openclaw"
// (the default agent), stream true, the conversation's session named by the OpenAI `user`
// (the gateway derives a stable session key from it, so the engine keeps the history), only
// the new message sent. The stream's chunks carry the reply's deltas and `delta.tool_calls`
// (the gateway reports the calls of client tools there; its own tools' events it reports
// only on its WebSocket protocol). A chunk whose delta has role "tool" is read as a tool's
// result (the engine double sends those). A failed run ends with an `error` object.

var _ engine.Chatter = (*Engine)(nil)

// chatChunk is one chunk of the gateway's stream.
type chatChunk struct {
	Choices []struct {
		Delta struct {
			Role       string `json:"role"`
			Content    string `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Chat implements engine.Chatter.
func (e *Engine) Chat(ctx context.Context, t engine.ChatTurn, emit func(engine.ChatEvent) error) error {
	body, _ := json.Marshal(map[string]any{"model": "openclaw", "stream": true, "user": t.Session,
		"messages": []any{map[string]string{"role": "user", "content": t.Message}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(t.Endpoint, "/")+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.chatClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		return engine.ErrChatDisabled
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var c chatChunk
		if json.Unmarshal(b, &c) == nil && c.Error != nil {
			return fmt.Errorf("%w: %s", engine.ErrChatRefused, c.Error.Message)
		}
		return fmt.Errorf("%w: HTTP %d", engine.ErrChatRefused, resp.StatusCode)
	}
	return readChat(resp.Body, emit)
}

// chatClient is HTTPClient, or a client without a timeout that ignores proxy settings (a
// turn streams as long as the agent works; ctx bounds it).
func (e *Engine) chatClient() *http.Client {
	if e.HTTPClient != nil {
		return e.HTTPClient
	}
	return &http.Client{Transport: noProxyTransport}
}

var noProxyTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return t
}()

// readChat reads the gateway's stream into events: text as it comes, each tool call once
// complete (its next result or text, the finish, or the end of the stream).
func readChat(r io.Reader, emit func(engine.ChatEvent) error) error {
	calls := map[int]*engine.ChatEvent{}
	flush := func() error {
		idx := make([]int, 0, len(calls))
		for i := range calls {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, i := range idx {
			if err := emit(*calls[i]); err != nil {
				return err
			}
		}
		clear(calls)
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if data = strings.TrimSpace(data); !ok || data == "" {
			continue
		}
		if data == "[DONE]" {
			return flush()
		}
		var c chatChunk
		if json.Unmarshal([]byte(data), &c) != nil {
			continue
		}
		if c.Error != nil {
			_ = flush()
			return fmt.Errorf("%w: %s", engine.ErrChatRefused, c.Error.Message)
		}
		if err := chatChoices(c, calls, flush, emit); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return flush()
}

// chatChoices turns one chunk's deltas into events.
func chatChoices(c chatChunk, calls map[int]*engine.ChatEvent, flush func() error, emit func(engine.ChatEvent) error) error {
	for _, ch := range c.Choices {
		d := ch.Delta
		for _, tc := range d.ToolCalls {
			ev := calls[tc.Index]
			if ev == nil {
				ev = &engine.ChatEvent{Kind: engine.ChatToolCall}
				calls[tc.Index] = ev
			}
			if tc.ID != "" {
				ev.ToolID = tc.ID
			}
			ev.ToolName += tc.Function.Name
			ev.Arguments += tc.Function.Arguments
		}
		switch {
		case d.Role == "tool":
			if err := flush(); err != nil {
				return err
			}
			if err := emit(engine.ChatEvent{Kind: engine.ChatToolResult, ToolID: d.ToolCallID, Text: d.Content}); err != nil {
				return err
			}
		case d.Content != "":
			if err := flush(); err != nil {
				return err
			}
			if err := emit(engine.ChatEvent{Kind: engine.ChatText, Text: d.Content}); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return nil
}
