package facade

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/agentplane/agentplane/internal/ops"
)

// Chat (an addition beyond the contract): POST /v0/agents/{agentId}/chat sends one message and
// streams the turn as server-sent events (ops.ChatEvent, `event: <type>` and its JSON);
// GET .../chat/conversations lists the agent's conversations, GET .../{conversationId} one
// transcript. The facade talks to the gateway with the agent's gateway token: the caller
// never holds it.

// chatKeepAlive is the interval of the keep-alive comments while a turn is quiet (a sleeping
// agent waking, a model thinking).
const chatKeepAlive = 15 * time.Second

func (s *Server) chat(r *http.Request, c *Caller) (*Response, error) {
	var req ops.ChatRequest
	if err := decodeJSON(r, &req, ops.MsgInvalidMessage); err != nil {
		return nil, err
	}
	turn, err := s.ops.StartChat(r.Context(), c.scope(), r.PathValue("agentId"), req)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	return &Response{Status: http.StatusOK, Header: h, Stream: func(w http.ResponseWriter) {
		streamChat(r.Context(), w, turn)
	}}, nil
}

// streamChat writes the turn's events as they come, with keep-alives while it is quiet.
func streamChat(ctx context.Context, w http.ResponseWriter, turn *ops.ChatTurn) {
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	events := make(chan ops.ChatEvent)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = turn.Run(ctx, func(ev ops.ChatEvent) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	keep := time.NewTicker(chatKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-done:
			return
		case ev := <-events:
			b, _ := json.Marshal(ev)
			if _, err := io.WriteString(w, "event: "+ev.Type+"\ndata: "+string(b)+"\n\n"); err != nil || rc.Flush() != nil {
				cancel()
				<-done
				return
			}
		case <-keep.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				cancel()
				<-done
				return
			}
		}
	}
}

func (s *Server) listConversations(r *http.Request, c *Caller) (*Response, error) {
	list, asleep, err := s.ops.ListConversations(r.Context(), c.scope(), r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"conversations": list, "asleep": asleep})
}

func (s *Server) getConversation(r *http.Request, c *Caller) (*Response, error) {
	conv, err := s.ops.GetConversation(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("conversationId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"conversation": conv})
}
