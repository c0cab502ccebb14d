package facade

import (
	"net/http"

	"github.com/agentplane/agentplane/facade/openapi"
	"github.com/agentplane/agentplane/internal/ops"
)

// chatOperations: talking to an agent (chat.go).
func chatOperations() map[string]*openapi.Operation {
	return map[string]*openapi.Operation{
		"POST /v0/agents/{agentId}/chat": {
			ID: "chat", Tag: "engine", Summary: "Send the agent a message and stream its reply (an addition beyond the contract)",
			Description: "One turn of a conversation (`conversationId`, or a new one), sent to the agent's gateway with its own " +
				"gateway token (never the caller's). The answer is `text/event-stream`, one event per step, each `event: <type>` " +
				"and a JSON `data`: `waking` and `awake` around the wake of a sleeping agent; `conversation` (`conversation`: id, " +
				"title); `text` (`text`: the reply's next fragment, as the gateway streams it); `tool` (`tool`: id, name, " +
				"arguments) and `tool_result` (`tool`: id, result) when the engine reports them; `usage` (`usage`: the model " +
				"requests and tokens the model proxy counted for the turn, `metered` false without a proxy; with the platform's " +
				"model price table also `costMicros` in millionths of `currency` and `unpricedRequests`); `refused` (`message`: " +
				"the agent's or workspace's model budget refused a request of the turn, and why); `error` (`message`); `done` " +
				"(`conversation`). Comments `: keep-alive` every 15 s while the turn is quiet. The turn is kept in the " +
				"conversation's transcript in the agent's home.",
			Body: ops.ChatRequest{}, Required: []string{"message"},
			Fields: map[string]*openapi.Schema{
				"message":        {Description: "The user's text (at most 32 KiB)."},
				"conversationId": {Description: "A conversation of the agent to continue; absent: a new one."},
			},
			Replies: []openapi.Reply{{
				Status: http.StatusOK, Desc: "The turn, as server-sent events.",
				Body: openapi.Describe(openapi.String(), "Server-sent events (see the description)."),
			}},
			Fails: []openapi.Fail{
				openapi.Fails(http.StatusBadRequest, ops.MsgInvalidMessage, ops.MsgInvalidConversationID), notFoundAgent,
				openapi.Fails(http.StatusConflict, ops.MsgAgentNotRunning), openapi.Fails(http.StatusInternalServerError, ops.MsgChatFailed),
			},
		},
		"GET /v0/agents/{agentId}/chat/conversations": {
			ID: "listConversations", Tag: "engine", Summary: "List the agent's conversations, the latest first (an addition beyond the contract)",
			Description: "Never wakes a sleeping agent: a runtime that cannot read its home then answers none, with `asleep` true.",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The conversations.", openapi.Props{
				"conversations": []ops.ConversationSummary{}, "asleep": openapi.Bool(),
			})},
			Fails: []openapi.Fail{notFoundAgent, openapi.Fails(http.StatusInternalServerError, ops.MsgChatFailed)},
		},
		"GET /v0/agents/{agentId}/chat/conversations/{conversationId}": {
			ID: "getConversation", Tag: "engine", Summary: "Read one conversation's transcript (an addition beyond the contract)",
			Replies: []openapi.Reply{openapi.Answer(http.StatusOK, "The transcript.", openapi.Props{"conversation": ops.Conversation{}})},
			Fails: []openapi.Fail{openapi.Fails(http.StatusNotFound, ops.MsgAgentNotFound, ops.MsgConversationNotFound),
				openapi.Fails(http.StatusConflict, ops.MsgAgentNotRunning), openapi.Fails(http.StatusInternalServerError, ops.MsgChatFailed)},
		},
	}
}
