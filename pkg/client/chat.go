package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ChatEvent is one event of a chat turn (POST /v0/agents/{agentId}/chat): Type is waking,
// awake, conversation, text, tool, tool_result, usage, refused, error or done, and the fields
// that belong to it are set.
type ChatEvent struct {
	Type         string               `json:"-"`
	Conversation *ConversationSummary `json:"conversation,omitempty"`
	Text         string               `json:"text,omitempty"`
	Tool         *ChatTool            `json:"tool,omitempty"`
	Usage        *TurnUsage           `json:"usage,omitempty"`
	Message      string               `json:"message,omitempty"`
}

// Chat sends message to the agent in conversation (""  starts a new one) and calls event for
// each event of the turn as the facade streams it, until the turn is done (nil), ctx ends
// (ctx's error) or the stream breaks (a turn that failed ends with its `error` event). A turn refused before it starts is an *Error (a 4xx);
// one that fails later reports an `error` or `refused` event and returns nil.
func (c *Agentplane) Chat(ctx context.Context, agentID, conversation, message string, event func(ChatEvent)) error {
	body, _ := json.Marshal(ChatRequest{Message: message, ConversationId: nonEmpty(conversation)})
	u := strings.TrimSuffix(c.raw.Server, "/") + "/v0/agents/" + url.PathEscape(agentID) + "/chat"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for _, edit := range c.raw.RequestEditors {
		if err := edit(ctx, req); err != nil {
			return err
		}
	}
	res, err := c.raw.Client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return Check(res.StatusCode, b)
	}
	err = readChatEvents(res.Body, event)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// readChatEvents reads the turn's server-sent events until `done` or the end of the stream.
func readChatEvents(r io.Reader, event func(ChatEvent)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	name, data, last := "", "", ""
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" && name != "":
			ev := ChatEvent{}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return fmt.Errorf("decode chat event %s: %w", name, err)
			}
			ev.Type = name
			event(ev)
			if name == "done" {
				return nil
			}
			name, data, last = "", "", name
		case strings.HasPrefix(l, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(l, "event:"))
		case strings.HasPrefix(l, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(l, "data:"), " ")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if last == "error" { // a turn that failed ends after its error
		return nil
	}
	return io.ErrUnexpectedEOF
}
