package ops

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"regexp"
	"sort"
	"sync"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Conversations are kept in the agent's home, beside the engine's state: the engine keeps
// each conversation's context in its own session (engine.ChatTurn.Session), the platform a
// transcript to show (what the user wrote, the reply, its tool calls, its usage) and an index
// of them. They travel with the home: kept while the agent sleeps, in its snapshots, gone
// with the agent; no object in the API server grows with them. The agent's own code can
// read and change them (they are its conversations): they are shown as text, never markup.
const (
	chatDir = "agentplane/chats"
	// maxConversations bounds the index (the oldest leave it); maxChatMessages a transcript
	// (its oldest messages leave it; the engine's session keeps its own history).
	maxConversations = 200
	maxChatMessages  = 400
)

// Chat messages (an addition beyond the contract).
const (
	MsgInvalidMessage        = "Invalid message"
	MsgConversationNotFound  = "Conversation not found"
	MsgInvalidConversationID = "Invalid conversation id"
	MsgChatFailed            = "Chat failed"
	MsgAgentNotRunning       = "Agent not running"
	// MsgChatDisabled: the gateway does not serve the endpoint chat turns go to.
	MsgChatDisabled = "The agent's gateway does not serve chat: enable gateway.http.endpoints.chatCompletions in its config"
	// MsgNotWoken: a sleeping agent's gateway did not run within the provisioning wait.
	MsgNotWoken = "The agent did not wake in time: try again"
)

var conversationIDRE = regexp.MustCompile(`^cnv-[a-z2-7]{16}$`)

// ConversationSummary is one conversation in the agent's list.
type ConversationSummary struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Turns     int       `json:"turns"`
}

// Conversation is a conversation's transcript.
type Conversation struct {
	ConversationSummary
	Messages []ChatMessage `json:"messages"`
}

// ChatMessage is one message of a transcript: the user's, or the agent's reply with its tool
// calls, its usage and how it ended (Error, Refused).
type ChatMessage struct {
	Role    string     `json:"role"` // user, assistant
	Text    string     `json:"text"`
	At      time.Time  `json:"at"`
	Tools   []ChatTool `json:"tools,omitempty"`
	Usage   *TurnUsage `json:"usage,omitempty"`
	Error   string     `json:"error,omitempty"`
	Refused string     `json:"refused,omitempty"`
}

// ChatTool is a tool call of a reply and its result.
type ChatTool struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
	Result    string `json:"result,omitempty"`
}

// chatLocks serializes the index writes of each agent on this replica.
type chatLocks struct{ m sync.Map }

func (l *chatLocks) of(a *agentsv1.Agent) *sync.Mutex {
	v, _ := l.m.LoadOrStore(a.UID, &sync.Mutex{})
	return v.(*sync.Mutex)
}

func (o *Ops) chatPath(name string) string {
	return path.Join(o.d.Engine.Layout().StateDir, chatDir, name)
}

// ListConversations returns the agent's conversations, the latest first. It does not wake a
// sleeping agent: a runtime that cannot read a sleeping agent's home answers none, and
// asleep true.
func (o *Ops) ListConversations(ctx context.Context, t Scope, agentID string) ([]ConversationSummary, bool, error) {
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, false, err
	}
	if o.d.Runtime == nil || o.d.Engine == nil {
		return nil, false, Fail(Internal, MsgChatFailed)
	}
	list, err := o.readIndex(ctx, a)
	if errors.Is(err, runtime.ErrNotRunning) {
		return []ConversationSummary{}, true, nil
	}
	return list, false, err
}

// GetConversation returns one of the agent's conversations.
func (o *Ops) GetConversation(ctx context.Context, t Scope, agentID, id string) (*Conversation, error) {
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return nil, err
	}
	if !conversationIDRE.MatchString(id) {
		return nil, Fail(NotFound, MsgConversationNotFound)
	}
	if o.d.Runtime == nil || o.d.Engine == nil {
		return nil, Fail(Internal, MsgChatFailed)
	}
	return o.readConversation(ctx, a, id)
}

func (o *Ops) readIndex(ctx context.Context, a *agentsv1.Agent) ([]ConversationSummary, error) {
	raw, err := o.d.Runtime.ReadFile(ctx, a, o.chatPath("index.json"))
	if errors.Is(err, runtime.ErrNotFound) {
		return []ConversationSummary{}, nil
	}
	if err != nil {
		return nil, WithMessage(MsgChatFailed, err)
	}
	var list []ConversationSummary
	if json.Unmarshal(raw, &list) != nil {
		return []ConversationSummary{}, nil // not ours any more: start over
	}
	list = slicesFilter(list, func(c ConversationSummary) bool { return conversationIDRE.MatchString(c.ID) })
	sort.SliceStable(list, func(i, j int) bool { return list[i].UpdatedAt.After(list[j].UpdatedAt) })
	return list, nil
}

func (o *Ops) readConversation(ctx context.Context, a *agentsv1.Agent, id string) (*Conversation, error) {
	raw, err := o.d.Runtime.ReadFile(ctx, a, o.chatPath(id+".json"))
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return nil, Fail(NotFound, MsgConversationNotFound)
	case errors.Is(err, runtime.ErrNotRunning):
		return nil, Because(Conflict, MsgAgentNotRunning, err)
	case err != nil:
		return nil, WithMessage(MsgChatFailed, err)
	}
	c := &Conversation{}
	if json.Unmarshal(raw, c) != nil || c.ID != id {
		return nil, Fail(NotFound, MsgConversationNotFound)
	}
	return c, nil
}

// saveConversation writes the transcript, then its entry in the index.
func (o *Ops) saveConversation(ctx context.Context, a *agentsv1.Agent, c *Conversation) error {
	if n := len(c.Messages); n > maxChatMessages {
		c.Messages = c.Messages[n-maxChatMessages:]
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := o.d.Runtime.WriteFile(ctx, a, o.chatPath(c.ID+".json"), b); err != nil {
		return err
	}
	mu := o.chats.of(a)
	mu.Lock()
	defer mu.Unlock()
	list, err := o.readIndex(ctx, a)
	if err != nil {
		return err
	}
	list = slicesFilter(list, func(s ConversationSummary) bool { return s.ID != c.ID })
	list = append([]ConversationSummary{c.ConversationSummary}, list...)
	if len(list) > maxConversations {
		list = list[:maxConversations]
	}
	if b, err = json.Marshal(list); err != nil {
		return err
	}
	return o.d.Runtime.WriteFile(ctx, a, o.chatPath("index.json"), b)
}

func slicesFilter[T any](s []T, keep func(T) bool) []T {
	out := s[:0]
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
