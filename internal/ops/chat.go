package ops

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
)

// maxChatMessageBytes bounds what a user sends in one turn.
const maxChatMessageBytes = 32 << 10

// ModelMeter is the model proxy as a chat turn reads it: what it counted for an agent
// ("<namespace>/<name>") before and after the turn.
type ModelMeter interface {
	Meter(agent string) modelproxy.Reading
	Settled(ctx context.Context, agent string) (modelproxy.Reading, error)
	// Currency is the price table's ("": the proxy prices nothing).
	Currency() string
}

// ChatRequest is one turn a user sends: Message into the conversation ConversationID (""
// starts a new one).
type ChatRequest struct {
	Message        string `json:"message"`
	ConversationID string `json:"conversationId,omitempty"`
}

// TurnUsage is what the model proxy counted for a turn's model requests (Metered false: no
// proxy on this platform, or the agent holds its provider keys itself).
type TurnUsage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	Metered      bool  `json:"metered"`
	// CostMicros is what the turn cost by the platform's price table, in millionths of
	// Currency ("" and 0: the platform has no price table); UnpricedRequests counts the
	// turn's requests of models the table has no price for.
	CostMicros       int64  `json:"costMicros,omitempty"`
	Currency         string `json:"currency,omitempty"`
	UnpricedRequests int64  `json:"unpricedRequests,omitempty"`
}

// ChatEvent is what a turn reports as it goes, in order: Type names it, the fields that
// belong to it are set.
type ChatEvent struct {
	// Type: conversation (Conversation), waking, awake, text (Text), tool (Tool), tool_result
	// (Tool with its ID and Result), usage (Usage), refused (Message: the budget's refusal),
	// error (Message), done (Conversation).
	Type         string               `json:"-"`
	Conversation *ConversationSummary `json:"conversation,omitempty"`
	Text         string               `json:"text,omitempty"`
	Tool         *ChatTool            `json:"tool,omitempty"`
	Usage        *TurnUsage           `json:"usage,omitempty"`
	Message      string               `json:"message,omitempty"`
}

// ChatTurn is a validated turn, ready to run.
type ChatTurn struct {
	o     *Ops
	t     Scope
	agent *agentsv1.Agent
	req   ChatRequest
}

// StartChat checks a turn before it streams: the message, the conversation id, the agent.
func (o *Ops) StartChat(ctx context.Context, t Scope, agentID string, req ChatRequest) (*ChatTurn, error) {
	if strings.TrimSpace(req.Message) == "" || len(req.Message) > maxChatMessageBytes || !utf8.ValidString(req.Message) {
		return nil, Fail(Invalid, MsgInvalidMessage)
	}
	if req.ConversationID != "" && !conversationIDRE.MatchString(req.ConversationID) {
		return nil, Fail(Invalid, MsgInvalidConversationID)
	}
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	if _, ok := o.d.Engine.(engine.Chatter); !ok || o.d.Runtime == nil {
		return nil, Fail(Internal, MsgChatFailed)
	}
	if a.Spec.Stopped {
		return nil, Fail(Conflict, MsgAgentNotRunning)
	}
	return &ChatTurn{o: o, t: t, agent: a, req: req}, nil
}

// Run runs the turn: it wakes a sleeping agent (waking, then awake), opens or starts the
// conversation, sends the message to the agent's gateway with the agent's gateway token and
// reports the reply as it streams (text, tool, tool_result), then the model proxy's count of
// the turn (usage) and, when the agent's or its workspace's budget refused a model request
// during the turn, the refusal (refused); it keeps the turn in the transcript and ends with
// done. A failure once the stream began is an error event; emit's own error ends the turn.
func (c *ChatTurn) Run(ctx context.Context, emit func(ChatEvent) error) error {
	o := c.o
	a, err := c.wake(ctx, emit)
	if err != nil {
		return err
	}
	conv, err := c.conversation(ctx, a)
	if err != nil {
		return emitError(emit, err)
	}
	if err := emit(ChatEvent{Type: "conversation", Conversation: &conv.ConversationSummary}); err != nil {
		return err
	}
	sec, err := o.GatewaySecret(ctx, a)
	if err != nil {
		return emitError(emit, WithMessage(MsgChatFailed, err))
	}
	now := o.d.Now().UTC()
	conv.Messages = append(conv.Messages, ChatMessage{Role: "user", Text: c.req.Message, At: now})
	reply := ChatMessage{Role: "assistant", At: now}
	key := a.Namespace + "/" + a.Name
	var before modelproxy.Reading
	if o.d.ModelMeter != nil {
		before = o.d.ModelMeter.Meter(key)
	}
	chatErr := o.d.Engine.(engine.Chatter).Chat(ctx, engine.ChatTurn{
		Endpoint: a.Status.Endpoint, Token: string(sec.Data[agentsv1.GatewayTokenDataKey]),
		Session: "agentplane-chat:" + conv.ID, Message: c.req.Message,
	}, func(ev engine.ChatEvent) error { return emit(reply.add(ev)) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := c.account(ctx, key, before, chatErr, &reply, emit); err != nil {
		return err
	}
	conv.Messages = append(conv.Messages, reply)
	conv.Turns++
	conv.UpdatedAt = o.d.Now().UTC()
	if err := o.saveConversation(ctx, a, conv); err != nil {
		o.d.Log.Info("cannot keep a chat transcript", "agent", a.Name, "error", err.Error())
	}
	return emit(ChatEvent{Type: "done", Conversation: &conv.ConversationSummary})
}

// wake wakes a sleeping agent, reporting it, and returns the agent as it is then.
func (c *ChatTurn) wake(ctx context.Context, emit func(ChatEvent) error) (*agentsv1.Agent, error) {
	o, a := c.o, c.agent
	asleep := sleeping(a)
	if asleep {
		if err := emit(ChatEvent{Type: "waking"}); err != nil {
			return nil, err
		}
	}
	if err := o.Awaken(ctx, c.t, a.Name); err != nil {
		return nil, emitError(emit, WithMessage(MsgChatFailed, err))
	}
	if asleep {
		got, err := o.Agent(ctx, c.t, a.Name)
		if err != nil {
			return nil, emitError(emit, err)
		}
		if a = got; a.Status.Phase != agentsv1.AgentRunning {
			return nil, emitError(emit, Fail(Unavailable, MsgNotWoken))
		}
		if err := emit(ChatEvent{Type: "awake"}); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// conversation opens the turn's conversation, or starts one titled by the message.
func (c *ChatTurn) conversation(ctx context.Context, a *agentsv1.Agent) (*Conversation, error) {
	if c.req.ConversationID != "" {
		return c.o.readConversation(ctx, a, c.req.ConversationID)
	}
	title := strings.Join(strings.Fields(c.req.Message), " ")
	if r := []rune(title); len(r) > 60 {
		title = string(r[:59]) + "…"
	}
	now := c.o.d.Now().UTC()
	return &Conversation{ConversationSummary: ConversationSummary{
		ID: newID("cnv-", 10), Title: title, CreatedAt: now, UpdatedAt: now,
	}, Messages: []ChatMessage{}}, nil
}

// account reports the turn's usage and how it ended: the budget's refusal, the gateway's
// failure, or nothing more.
func (c *ChatTurn) account(ctx context.Context, key string, before modelproxy.Reading, chatErr error, reply *ChatMessage, emit func(ChatEvent) error) error {
	after := before
	if m := c.o.d.ModelMeter; m != nil {
		// The proxy settles a request once the engine has read its answer: bounded, in case
		// another turn of the agent keeps a request open.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		after, _ = m.Settled(sctx, key)
		cancel()
	}
	u := &TurnUsage{Metered: c.o.d.ModelMeter != nil, Requests: after.Spent.Requests - before.Spent.Requests,
		InputTokens: after.Spent.InputTokens - before.Spent.InputTokens, OutputTokens: after.Spent.OutputTokens - before.Spent.OutputTokens,
		CostMicros: after.Spent.CostMicros - before.Spent.CostMicros, UnpricedRequests: after.Spent.Unpriced - before.Spent.Unpriced}
	if m := c.o.d.ModelMeter; m != nil {
		u.Currency = m.Currency()
	}
	reply.Usage = u
	if err := emit(ChatEvent{Type: "usage", Usage: u}); err != nil {
		return err
	}
	switch {
	case after.Refusals > before.Refusals:
		reply.Refused = after.LastRefusal
		return emit(ChatEvent{Type: "refused", Message: after.LastRefusal})
	case errors.Is(chatErr, engine.ErrChatDisabled):
		reply.Error = MsgChatDisabled
	case errors.Is(chatErr, engine.ErrChatRefused):
		reply.Error = strings.TrimPrefix(strings.TrimPrefix(chatErr.Error(), engine.ErrChatRefused.Error()), ": ")
	case chatErr != nil:
		c.o.d.Log.Info("chat turn failed", "agent", c.agent.Name, "error", chatErr.Error())
		reply.Error = MsgChatFailed
	default:
		return nil
	}
	return emit(ChatEvent{Type: "error", Message: reply.Error})
}

// add takes an engine event into the reply and returns it as a chat event.
func (m *ChatMessage) add(ev engine.ChatEvent) ChatEvent {
	switch ev.Kind {
	case engine.ChatToolCall:
		t := ChatTool{ID: ev.ToolID, Name: ev.ToolName, Arguments: ev.Arguments}
		m.Tools = append(m.Tools, t)
		return ChatEvent{Type: "tool", Tool: &t}
	case engine.ChatToolResult:
		for i := range m.Tools {
			if m.Tools[i].ID == ev.ToolID {
				m.Tools[i].Result = ev.Text
			}
		}
		return ChatEvent{Type: "tool_result", Tool: &ChatTool{ID: ev.ToolID, Result: ev.Text}}
	default:
		m.Text += ev.Text
		return ChatEvent{Type: "text", Text: ev.Text}
	}
}

// emitError reports err's message as the turn's error event.
func emitError(emit func(ChatEvent) error, err error) error {
	if e := emit(ChatEvent{Type: "error", Message: Classify(err).Message}); e != nil {
		return e
	}
	return err
}
