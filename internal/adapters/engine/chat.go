package engine

import (
	"context"
	"errors"
)

// ChatTurn is one message to an agent's gateway in a conversation.
type ChatTurn struct {
	// Endpoint is the gateway's base URL; Token its gateway token (the platform's, never the
	// browser's).
	Endpoint, Token string
	// Session names the engine session that keeps the conversation (the engine remembers the
	// earlier turns of a session); Message is the user's text.
	Session, Message string
}

// ChatEvent is what the gateway reported during a turn, in order.
type ChatEvent struct {
	Kind ChatEventKind
	// Text: the reply's next fragment (ChatText), a tool's result (ChatToolResult).
	Text string
	// ToolID, ToolName and Arguments name a tool call (ChatToolCall; ChatToolResult carries
	// ToolID).
	ToolID, ToolName, Arguments string
}

// ChatEventKind is the kind of a ChatEvent.
type ChatEventKind string

const (
	ChatText       ChatEventKind = "text"
	ChatToolCall   ChatEventKind = "tool"
	ChatToolResult ChatEventKind = "tool_result"
)

// Errors of a chat turn.
var (
	// ErrChatDisabled: the gateway does not serve its chat endpoint.
	ErrChatDisabled = errors.New("the gateway's chat endpoint is off")
	// ErrChatRefused: the gateway refused the turn (its message follows), or the run failed.
	ErrChatRefused = errors.New("the gateway refused the turn")
)

// Chatter is an engine whose gateway takes chat turns.
type Chatter interface {
	// Chat sends one turn and calls emit for each event as the gateway streams it; an error
	// of emit ends the turn with it. A run that fails after it began wraps ErrChatRefused with
	// the gateway's message.
	Chat(ctx context.Context, t ChatTurn, emit func(ChatEvent) error) error
}
